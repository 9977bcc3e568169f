// PageBuffer: a large, zero-filled, 64-byte aligned allocation for table
// storage that asks the kernel for transparent huge pages.
//
// Sparse tables touch rows at random: with 4 KiB pages nearly every access
// to a table of a few hundred MiB is also a TLB miss (expensive under
// virtualization). Buffers of kHugePage bytes or more are mapped with mmap,
// aligned to 2 MiB and marked MADV_HUGEPAGE, which works in the common THP
// "madvise" mode and is harmless where THP is off; whole 2 MiB ranges inside
// get huge pages. Smaller buffers come from the heap.
//
// Move-only owner of its memory. Not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

namespace pstrain::server {

class PageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  PageBuffer() = default;
  // Throws std::bad_alloc when the memory cannot be had, like operator new.
  explicit PageBuffer(size_t bytes);
  ~PageBuffer() { Release(); }

  PageBuffer(PageBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)),
        mapped_(std::exchange(other.mapped_, false)) {}
  PageBuffer& operator=(PageBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
      mapped_ = std::exchange(other.mapped_, false);
    }
    return *this;
  }
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;

  void* data() const { return data_; }
  // Bytes held: the requested size rounded up to 64 (heap) or 4096 (mapped).
  size_t bytes() const { return bytes_; }

 private:
  void Release();

  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool mapped_ = false;
};

// Huge-page backed mappings of `bytes` (>= PageBuffer::kHugePage), aligned
// to 2 MiB; zero-filled. Throws std::bad_alloc.
void* MapHugePages(size_t bytes);
void UnmapHugePages(void* p, size_t bytes);

// A std allocator whose large allocations are huge-page mappings (the
// arrays of hash maps that hold millions of ids); small ones use the heap.
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < PageBuffer::kHugePage) return std::allocator<T>().allocate(n);
    return static_cast<T*>(MapHugePages(bytes));
  }
  void deallocate(T* p, size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes < PageBuffer::kHugePage) return std::allocator<T>().deallocate(p, n);
    UnmapHugePages(p, bytes);
  }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

}  // namespace pstrain::server
