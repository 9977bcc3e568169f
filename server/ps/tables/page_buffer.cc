#include "server/ps/tables/page_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

namespace pstrain::server {

PageBuffer::PageBuffer(size_t bytes) {
  if (bytes < kHugePage) {
    bytes_ = (bytes + 63) / 64 * 64;
    if (bytes_ == 0) bytes_ = 64;
    data_ = std::aligned_alloc(64, bytes_);
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(data_, 0, bytes_);
    return;
  }
  // Page-rounded; the kernel backs the whole 2 MiB ranges inside with huge
  // pages and the rest with normal ones.
  constexpr size_t kPage = 4096;
  bytes_ = (bytes + kPage - 1) / kPage * kPage;
  data_ = MapHugePages(bytes_);
  mapped_ = true;
}

void* MapHugePages(size_t bytes) {
  constexpr size_t kPage = 4096;
  bytes = (bytes + kPage - 1) / kPage * kPage;
  // Over-map by one huge page, then unmap the unaligned head and the tail.
  constexpr size_t kHugePage = PageBuffer::kHugePage;
  const size_t span = bytes + kHugePage;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
  if (aligned > start) munmap(p, aligned - start);
  const uintptr_t end = aligned + bytes;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  // Advice only: without THP the mapping simply uses normal pages.
  madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

void UnmapHugePages(void* p, size_t bytes) {
  constexpr size_t kPage = 4096;
  munmap(p, (bytes + kPage - 1) / kPage * kPage);
}

void PageBuffer::Release() {
  if (data_ == nullptr) return;
  if (mapped_) {
    munmap(data_, bytes_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  bytes_ = 0;
  mapped_ = false;
}

}  // namespace pstrain::server
