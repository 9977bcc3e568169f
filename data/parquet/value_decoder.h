// Decoding of the values section of a data page (and of a dictionary page)
// into typed arrays: PLAIN for every physical type, RLE for BOOLEAN,
// PLAIN_DICTIONARY / RLE_DICTIONARY (indices into the chunk's dictionary),
// DELTA_BINARY_PACKED (INT32, INT64), DELTA_LENGTH_BYTE_ARRAY (BYTE_ARRAY),
// DELTA_BYTE_ARRAY (BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY) and BYTE_STREAM_SPLIT
// (FLOAT, DOUBLE, INT32, INT64, FIXED_LEN_BYTE_ARRAY).
//
// Values are appended densely (the caller places them in the slots of the
// non-null values). Every count is checked against the bytes that hold the
// values before they are read, and no buffer is sized by a count read from
// the file. Stateless functions; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "data/parquet/pod_vector.h"
#include "data/parquet/types.h"

namespace pstrain::parquet {

// Where values go, by physical type (see ColumnData): ints, doubles, or
// byte strings as end offsets into an arena. REQUIRES for byte strings:
// `offsets` non-empty, its last entry arena->size().
struct ValueSink {
  PodVector<int64_t>* ints = nullptr;
  PodVector<double>* doubles = nullptr;
  PodVector<uint32_t>* offsets = nullptr;
  std::string* arena = nullptr;
};

// The values of a column chunk's dictionary page, decoded.
struct Dictionary {
  bool present = false;
  int64_t size = 0;
  PodVector<int64_t> ints;
  PodVector<double> doubles;
  PodVector<uint32_t> offsets;  // [size + 1]
  std::string arena;

  void Clear() {
    present = false;
    size = 0;
    ints.clear();
    doubles.clear();
    offsets.assign(1, 0);
    arena.clear();
  }
  ValueSink sink() { return ValueSink{&ints, &doubles, &offsets, &arena}; }
};

// The physical type of the values and, for FIXED_LEN_BYTE_ARRAY, their
// length.
struct ValueType {
  PhysicalType type;
  int type_length = 0;
};

// Decodes `n` values in `encoding` from `data` and appends them to `out`.
// `dictionary` is used by the dictionary encodings (nullptr: none read).
// Byte strings may grow the arena to at most `arena_limit` bytes (and 4 GiB):
// a dictionary or DELTA_BYTE_ARRAY's shared prefixes can make a small page
// decode to far more. Errors: Unimplemented for an encoding this type cannot
// have or this reader does not know; DataLoss when the data is corrupt or
// too short for n values; ResourceExhausted past the arena's limit.
absl::Status DecodeValues(int32_t encoding, ValueType type, std::string_view data, int64_t n,
                          const Dictionary* dictionary, uint64_t arena_limit, ValueSink out);

// Decodes `n` dictionary indices (the values section of a PLAIN_DICTIONARY
// or RLE_DICTIONARY page: a bit-width byte, then the hybrid) and appends
// them to `*out`. DataLoss when the data is too short for n indices or an
// index is not below `dictionary_size`. REQUIRES: n at most the page's
// checked value count (`*out` grows by n).
absl::Status DecodeDictionaryIndices(std::string_view data, int64_t n, int64_t dictionary_size,
                                     PodVector<uint32_t>* out);

}  // namespace pstrain::parquet
