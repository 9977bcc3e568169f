// Buffer: an immutable byte range plus the object that keeps it alive.
//
// Tensor payloads travel as Buffers so that a send can move the owner into
// ZeroMQ's free callback (zero copy) and a receive can hand the ZeroMQ
// message itself to the consumer. Copying a Buffer copies a shared_ptr, not
// the bytes. Thread-safe for concurrent readers; the bytes are never written
// through a Buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <type_traits>

#include "absl/strings/string_view.h"
#include <vector>

namespace pstrain {

class Buffer {
 public:
  Buffer() = default;
  // A view of `size` bytes at `data`, kept alive by `owner` (may be null for
  // static storage).
  Buffer(const void* data, size_t size, std::shared_ptr<const void> owner)
      : data_(static_cast<const uint8_t*>(data)), size_(size), owner_(std::move(owner)) {}

  // Takes ownership of `v` without copying its elements.
  template <typename T>
  static Buffer FromVector(std::vector<T>&& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    auto holder = std::make_shared<std::vector<T>>(std::move(v));
    const void* p = holder->data();
    size_t n = holder->size() * sizeof(T);
    return Buffer(p, n, std::move(holder));
  }
  static Buffer FromString(std::string&& s) {
    auto holder = std::make_shared<std::string>(std::move(s));
    const void* p = holder->data();
    size_t n = holder->size();
    return Buffer(p, n, std::move(holder));
  }
  // Copies `size` bytes into a new owned, 64-byte aligned allocation.
  static Buffer Copy(const void* data, size_t size);
  // A new uninitialized, 64-byte aligned allocation of `size` bytes that the caller
  // may fill through `*out` before sharing the Buffer.
  static Buffer Allocate(size_t size, uint8_t** out);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::shared_ptr<const void>& owner() const { return owner_; }

  // Number of T elements (size must be a multiple of sizeof(T)).
  template <typename T>
  size_t count() const {
    return size_ / sizeof(T);
  }
  // Typed view. REQUIRES: size() % sizeof(T) == 0 and data() aligned for T
  // (received payloads are realigned by the transport).
  template <typename T>
  std::span<const T> as() const {
    return {reinterpret_cast<const T*>(data_), size_ / sizeof(T)};
  }
  // Sub-range view sharing the owner.
  Buffer Slice(size_t offset, size_t length) const {
    return Buffer(data_ + offset, length, owner_);
  }
  absl::string_view view() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::shared_ptr<const void> owner_;
};

}  // namespace pstrain
