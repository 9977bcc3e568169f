#include "common/buffer.h"

#include <cstdlib>
#include <new>

namespace pstrain {
namespace {
struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};
}  // namespace

Buffer Buffer::Allocate(size_t size, uint8_t** out) {
  size_t rounded = (size + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::shared_ptr<void> owner(p, AlignedFree());
  *out = static_cast<uint8_t*>(p);
  return Buffer(p, size, std::move(owner));
}

Buffer Buffer::Copy(const void* data, size_t size) {
  uint8_t* dst = nullptr;
  Buffer b = Allocate(size, &dst);
  if (size > 0) std::memcpy(dst, data, size);
  return b;
}

}  // namespace pstrain
