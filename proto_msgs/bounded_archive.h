// Cereal serialization of std::vector and std::string for the portable
// binary archives, with a guard the stock versions lack: a decoded length
// is checked against the bytes actually left in the frame *before* any
// allocation, so a forged length prefix cannot make a receiver allocate
// gigabytes. Include this instead of <cereal/types/vector.hpp> and
// <cereal/types/string.hpp> (including those too would be ambiguous).
#pragma once

#include <cstddef>
#include <streambuf>
#include <string>
#include <type_traits>
#include <vector>

#include <cereal/archives/portable_binary.hpp>
#include <cereal/cereal.hpp>

namespace pstrain::proto_internal {

// A read-only streambuf over a byte range that knows how much is left.
class SpanStreamBuf : public std::streambuf {
 public:
  SpanStreamBuf(const char* data, size_t size) {
    char* p = const_cast<char*>(data);
    setg(p, p, p + size);
  }
  size_t remaining() const { return static_cast<size_t>(egptr() - gptr()); }
  size_t consumed() const { return static_cast<size_t>(gptr() - eback()); }
};

// The buffer being decoded on this thread (set by the decoder for the
// duration of one decode; null otherwise).
inline thread_local const SpanStreamBuf* tl_decode_buf = nullptr;

inline void CheckLength(uint64_t count, size_t min_bytes_each) {
  size_t left = tl_decode_buf != nullptr ? tl_decode_buf->remaining() : 0;
  if (tl_decode_buf == nullptr || min_bytes_each == 0 ||
      count > left / min_bytes_each) {
    throw cereal::Exception("length prefix larger than the message");
  }
}

}  // namespace pstrain::proto_internal

namespace cereal {

template <class T, class A>
void save(PortableBinaryOutputArchive& ar, const std::vector<T, A>& v) {
  ar(make_size_tag(static_cast<size_type>(v.size())));
  if constexpr (std::is_arithmetic_v<T>) {
    ar(binary_data(v.data(), v.size() * sizeof(T)));
  } else {
    for (const auto& x : v) ar(x);
  }
}

template <class T, class A>
void load(PortableBinaryInputArchive& ar, std::vector<T, A>& v) {
  size_type n = 0;
  ar(make_size_tag(n));
  if constexpr (std::is_arithmetic_v<T>) {
    pstrain::proto_internal::CheckLength(n, sizeof(T));
    v.resize(static_cast<size_t>(n));
    ar(binary_data(v.data(), static_cast<size_t>(n) * sizeof(T)));
  } else {
    pstrain::proto_internal::CheckLength(n, 1);
    v.clear();
    v.resize(static_cast<size_t>(n));
    for (auto& x : v) ar(x);
  }
}

inline void save(PortableBinaryOutputArchive& ar, const std::string& s) {
  ar(make_size_tag(static_cast<size_type>(s.size())));
  ar(binary_data(s.data(), s.size()));
}

inline void load(PortableBinaryInputArchive& ar, std::string& s) {
  size_type n = 0;
  ar(make_size_tag(n));
  pstrain::proto_internal::CheckLength(n, 1);
  s.resize(static_cast<size_t>(n));
  ar(binary_data(s.data(), static_cast<size_t>(n)));
}

}  // namespace cereal
