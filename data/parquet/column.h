// What a Parquet file's columns are (ColumnDescriptor) and the decoded
// values of one column chunk (ColumnData).
//
// A column is a leaf of the file's schema: a top-level field of a primitive
// type (REQUIRED or OPTIONAL), or a LIST of a primitive type (the standard
// 3-level form `optional group x (LIST) { repeated group list { optional T
// element } }`, its legacy 2-level forms, or a top-level `repeated T x`).
// Leaves under structs, maps and lists of lists get a descriptor too, with
// `unsupported` saying why they cannot be read, so that the other columns of
// such a file stay readable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "data/parquet/pod_vector.h"
#include "data/parquet/types.h"

namespace pstrain::parquet {

struct ColumnDescriptor {
  // The top-level field ("price"; "tags" for a list); for an unsupported
  // leaf, its dotted path.
  std::string name;
  // The leaf's dotted path in the schema ("tags.list.element").
  std::string path;
  PhysicalType type = PhysicalType::kInt64;
  LogicalKind logical = LogicalKind::kNone;
  int type_length = 0;     // FIXED_LEN_BYTE_ARRAY: bytes per value
  int scale = 0;           // kDecimal
  int precision = 0;       // kDecimal
  int int_bits = 0;        // kInt: 8, 16, 32 or 64
  bool int_signed = true;  // kInt
  bool utc = false;        // kTime*, kTimestamp*: isAdjustedToUTC
  int max_def = 0;         // maximum definition level
  int max_rep = 0;         // maximum repetition level (1 for lists)
  bool nullable = false;   // a row may be null (OPTIONAL field; a list may be null)
  bool is_list = false;
  // Lists: definition levels below list_def are a null list, list_def an
  // empty list, from element_def on an element (null below max_def).
  int list_def = 0;
  int element_def = 0;
  // Non-empty: why ReadColumn refuses this column, e.g. "a struct".
  std::string unsupported;
};

// Bounds on what a file can make ReadColumn allocate. The defaults take any
// file a mainstream writer makes; lower them for untrusted input (the
// fuzzer does).
struct ReadOptions {
  // A page may decompress to at most this many bytes, and its byte strings
  // decode to at most this many (dictionaries and DELTA_BYTE_ARRAY prefixes
  // expand).
  int64_t max_page_bytes = int64_t{1} << 30;
  // A page may hold at most this many values (level entries, nulls
  // included): a run of nulls costs a few bytes whatever its length.
  int64_t max_page_values = int64_t{1} << 27;
  // A column chunk may hold at most this many values (below 2^32: slots are
  // 32-bit offsets).
  int64_t max_chunk_values = int64_t{1} << 31;
  // The byte strings of a column chunk may decode to at most this many bytes
  // in all (at most 2^32 - 1: offsets are 32-bit).
  int64_t max_chunk_string_bytes = UINT32_MAX;
  // Check the CRC-32 of pages whose header carries one.
  bool verify_checksums = true;
  // Hand out a BYTE_ARRAY or FIXED_LEN_BYTE_ARRAY chunk whose data pages are
  // all dictionary-encoded as indices into its dictionary (ColumnData's
  // dictionary form) instead of a copy of each value's bytes. A chunk that
  // has a page of another encoding (writers fall back to PLAIN when the
  // dictionary grows too large) is read as byte strings either way.
  bool keep_dictionary = false;
};

namespace internal {
struct ColumnScratch;
}  // namespace internal

// The decoded values of one column chunk. Values sit in slots: one slot per
// row for a flat column, one per element for a list. The values are in the
// one typed array that the physical type uses:
//   BOOLEAN (0/1), INT32 (widened; zero-extended when the logical type is
//   unsigned), INT64 (UINT_64: the same bits), INT96 (converted to
//   nanoseconds since the Unix epoch)          -> ints
//   FLOAT, DOUBLE                              -> doubles
//   BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY           -> slot i is the bytes
//       arena[str_offsets[i], str_offsets[i + 1]), or, in the dictionary
//       form (below), dictionary entry dict_index[i]; bytes(i) reads both
// A null slot holds 0 or an empty string. Decimals stay unscaled: an integer
// for INT32/INT64, big-endian two's complement bytes for the byte arrays
// (DecimalBytesToInt128). Reused across calls: the arrays keep their
// capacity, so no allocation once they have grown. Owned and used by one
// thread. Movable, not copyable.
struct ColumnData {
  ColumnData();
  ~ColumnData();
  ColumnData(ColumnData&&) noexcept;
  ColumnData& operator=(ColumnData&&) noexcept;

  int64_t num_rows = 0;
  int64_t num_values = 0;          // slots: num_rows, or the elements of all lists
  PodVector<uint8_t> row_valid;  // [num_rows]: 0 = a null value, or a null list
  // Lists only: row r's elements are the slots [list_offsets[r],
  // list_offsets[r + 1]); [num_rows + 1] entries.
  std::vector<uint32_t> list_offsets;
  PodVector<uint8_t> value_valid;  // lists only: [num_values], 0 = a null element

  PodVector<int64_t> ints;
  PodVector<double> doubles;
  PodVector<uint32_t> str_offsets;  // [num_values + 1]
  std::string arena;

  // The dictionary form of byte strings (ReadOptions::keep_dictionary):
  // when dictionary_encoded, str_offsets and arena are empty and slot i is
  // entry dict_index[i] of the dictionary, entry k being the bytes
  // dict_arena[dict_offsets[k], dict_offsets[k + 1]). The chunk's
  // dictionary page gives entries [0, dict_size()); one more, empty, entry
  // at dict_size() is the null slots' index. Every index is at most
  // dict_size().
  bool dictionary_encoded = false;
  PodVector<uint32_t> dict_index;    // [num_values]
  PodVector<uint32_t> dict_offsets;  // [dict_size() + 2]
  std::string dict_arena;

  // Entries of the file's dictionary (without the null slots' entry).
  int64_t dict_size() const {
    return dictionary_encoded ? static_cast<int64_t>(dict_offsets.size()) - 2 : 0;
  }
  // Dictionary entry k, 0 <= k <= dict_size().
  std::string_view dict_entry(int64_t k) const {
    return std::string_view(dict_arena)
        .substr(dict_offsets[k], dict_offsets[k + 1] - dict_offsets[k]);
  }
  // Slot i's bytes (BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY), in either form.
  std::string_view bytes(int64_t i) const {
    if (dictionary_encoded) return dict_entry(dict_index[i]);
    return std::string_view(arena).substr(str_offsets[i], str_offsets[i + 1] - str_offsets[i]);
  }
  // Whether slot i holds a value.
  bool valid(int64_t i) const {
    return value_valid.empty() ? row_valid[i] != 0 : value_valid[i] != 0;
  }

  // Buffers reused between reads (pages, levels, dictionary, codec state).
  std::unique_ptr<internal::ColumnScratch> scratch;
};

// The signed integer that big-endian two's complement `bytes` (at most 16)
// hold, e.g. a decimal's unscaled value; false when there are more than 16.
bool DecimalBytesToInt128(std::string_view bytes, __int128* out);

}  // namespace pstrain::parquet
