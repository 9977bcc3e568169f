// libFuzzer target: bytes -> ParquetFile::FromBuffer -> every column of every
// row group read. Must never crash, hang or allocate past the ReadOptions
// limits below; damaged data is a DataLoss error, a refused feature
// Unimplemented, a lying count ResourceExhausted. The seed corpus
// (tests/fuzz/corpus/parquet/) holds small real files, so that mutations
// reach the page decoders.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/parquet/parquet_file.h"

using namespace pstrain::parquet;

namespace {

bool Expected(const absl::Status& st) {
  return st.ok() || st.code() == absl::StatusCode::kDataLoss ||
         st.code() == absl::StatusCode::kUnimplemented ||
         st.code() == absl::StatusCode::kResourceExhausted;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReadOptions options;
  options.max_page_bytes = 1 << 24;
  options.max_page_values = 1 << 20;
  options.max_chunk_values = 1 << 22;
  options.max_chunk_string_bytes = 1 << 26;
  auto file = ParquetFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size),
                                      "fuzz.parquet", options);
  if (!file.ok()) {
    if (!Expected(file.status())) __builtin_trap();
    return 0;
  }
  // The same file with byte strings in the dictionary form: the same values.
  options.keep_dictionary = true;
  auto keep = ParquetFile::FromBuffer(std::string(reinterpret_cast<const char*>(data), size),
                                      "fuzz.parquet", options);
  if (!keep.ok()) __builtin_trap();
  ColumnData column, dict;
  for (int rg = 0; rg < (*file)->num_row_groups(); ++rg) {
    for (size_t col = 0; col < (*file)->columns().size(); ++col) {
      absl::Status st = (*file)->ReadColumn(rg, static_cast<int>(col), &column);
      if (!Expected(st)) __builtin_trap();
      absl::Status dict_st = (*keep)->ReadColumn(rg, static_cast<int>(col), &dict);
      if (!Expected(dict_st)) __builtin_trap();
      if (dict_st.ok() && dict.dictionary_encoded) {
        if (dict.dict_index.size() != static_cast<size_t>(dict.num_values) ||
            dict.dict_offsets.back() != dict.dict_arena.size()) {
          __builtin_trap();
        }
        for (uint32_t k : dict.dict_index) {
          if (k > dict.dict_size()) __builtin_trap();
        }
      }
      const PhysicalType type = (*file)->columns()[col].type;
      if (st.ok() && dict_st.ok() &&
          (type == PhysicalType::kByteArray || type == PhysicalType::kFixedLenByteArray)) {
        if (column.num_values != dict.num_values) __builtin_trap();
        for (int64_t i = 0; i < column.num_values; ++i) {
          if (column.bytes(i) != dict.bytes(i)) __builtin_trap();
        }
      }
      if (!st.ok()) continue;
      // What readers of ColumnData rely on.
      if (column.row_valid.size() != static_cast<size_t>(column.num_rows)) __builtin_trap();
      if ((*file)->columns()[col].is_list &&
          (column.list_offsets.size() != static_cast<size_t>(column.num_rows) + 1 ||
           column.list_offsets.back() != column.num_values)) {
        __builtin_trap();
      }
      if (column.str_offsets.size() > 1 && column.str_offsets.back() != column.arena.size()) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
