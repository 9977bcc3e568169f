// PodVector: a std::vector of plain values whose resize() leaves the new
// elements uninitialised (a decoder overwrites them next), instead of
// zero-filling them first: the value-initialising resize of the decoded
// column arrays was a memset of every value of every chunk.
#pragma once

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace pstrain::parquet {

// std::allocator, except that construct() without arguments
// default-initialises (for T a plain value: leaves it as it is).
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using PodVector = std::vector<T, DefaultInitAllocator<T>>;

}  // namespace pstrain::parquet
