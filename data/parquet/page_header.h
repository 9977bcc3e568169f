// The header in front of each page of a column chunk (PageHeader of
// parquet.thrift), and its decoding. Enum-valued fields keep the file's raw
// number (see types.h). Plain structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace pstrain::parquet {

struct DataPageHeader {
  int32_t num_values = 0;  // level entries, nulls included
  int32_t encoding = 0;
  int32_t definition_level_encoding = 0;
  int32_t repetition_level_encoding = 0;
};

struct DataPageHeaderV2 {
  int32_t num_values = 0;
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  int32_t encoding = 0;
  int32_t definition_levels_byte_length = 0;
  int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

struct DictionaryPageHeader {
  int32_t num_values = 0;
  int32_t encoding = 0;
};

struct PageHeader {
  int32_t type = 0;  // PageType
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  bool has_crc = false;
  uint32_t crc = 0;  // CRC-32 of the page's bytes after the header
  bool has_data_page = false;
  DataPageHeader data_page;
  bool has_data_page_v2 = false;
  DataPageHeaderV2 data_page_v2;
  bool has_dictionary_page = false;
  DictionaryPageHeader dictionary_page;
};

// Decodes the page header at the start of `bytes` (which may go on with the
// page and more) into `*header`; `*header_size` is the header's length.
// DataLoss when it is not a valid header.
absl::Status DecodePageHeader(std::string_view bytes, PageHeader* header, size_t* header_size);

}  // namespace pstrain::parquet
