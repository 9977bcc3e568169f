#include "common/buffer.h"

#include <cstring>
#include <memory>

namespace pstrain {
namespace {

// One cache line: the unit of Buffer::Allocate, so that the bytes are
// 64-byte aligned and share one allocation with their reference count.
struct alignas(64) CacheLine {
  uint8_t bytes[64];
};

}  // namespace

Buffer Buffer::Allocate(size_t size, uint8_t** out) {
  size_t lines = size == 0 ? 1 : (size + 63) / 64;
  // Throws std::bad_alloc like operator new when the memory cannot be had.
  std::shared_ptr<CacheLine[]> owner = std::make_shared_for_overwrite<CacheLine[]>(lines);
  *out = owner[0].bytes;
  uint8_t* p = *out;
  return Buffer(p, size, std::shared_ptr<const void>(std::move(owner), p));
}

Buffer Buffer::Copy(const void* data, size_t size) {
  uint8_t* dst = nullptr;
  Buffer b = Allocate(size, &dst);
  if (size > 0) std::memcpy(dst, data, size);
  return b;
}

}  // namespace pstrain
