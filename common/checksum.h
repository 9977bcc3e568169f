// Checksum64: a fast streaming 64-bit checksum for files we write and read
// back (model exports, checkpoint shards). Not cryptographic: it catches
// corruption and truncation, not tampering. Stable across builds and
// machines (little-endian byte order). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace pstrain {

class Checksum64 {
 public:
  void Update(const void* data, size_t n);
  uint64_t Digest() const;
  // The digest as 16 lower-case hex digits.
  std::string Hex() const;

 private:
  void Block(const uint8_t* p);

  uint64_t lanes_[4] = {0x9e3779b97f4a7c15ULL, 0xc2b2ae3d27d4eb4fULL, 0x165667b19e3779f9ULL,
                        0x27d4eb2f165667c5ULL};
  uint8_t pending_[32];
  size_t pending_size_ = 0;
  uint64_t total_ = 0;
};

}  // namespace pstrain
