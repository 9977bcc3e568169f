// The file metadata of a Parquet file (the footer's FileMetaData), as far as
// the reader needs it, and its decoding from the Thrift compact protocol.
// Fields the reader does not use (statistics, key-value metadata, column
// orders, indexes, bloom filters) are skipped. Enum-valued fields keep the
// file's raw number (see types.h). Plain structs; no behaviour beyond
// decoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/parquet/types.h"

namespace pstrain::parquet {

// The LogicalType union of a schema element, flattened.
struct LogicalType {
  LogicalKind kind = LogicalKind::kNone;
  bool is_list = false;  // the LIST annotation of a group
  bool is_map = false;   // the MAP annotation of a group
  int32_t scale = 0;     // kDecimal
  int32_t precision = 0;
  int32_t bit_width = 0;  // kInt
  bool is_signed = true;
  bool utc = false;  // kTime*, kTimestamp*: isAdjustedToUTC
};

struct SchemaElement {
  std::string name;
  bool has_type = false;  // set for leaves only
  int32_t type = 0;       // PhysicalType
  int32_t type_length = 0;
  bool has_repetition = false;  // unset only for the root
  int32_t repetition = 0;       // Repetition
  int32_t num_children = 0;     // groups
  bool has_converted_type = false;
  int32_t converted_type = 0;  // ConvertedType
  int32_t scale = 0;
  int32_t precision = 0;
  bool has_logical_type = false;
  LogicalType logical_type;
};

struct ColumnMetaData {
  int32_t type = 0;  // PhysicalType
  std::vector<std::string> path_in_schema;
  int32_t codec = 0;  // Codec
  int64_t num_values = 0;
  int64_t total_uncompressed_size = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  bool has_dictionary_page_offset = false;
  int64_t dictionary_page_offset = 0;
};

struct ColumnChunk {
  bool has_file_path = false;  // data in another file: not supported
  bool has_meta_data = false;
  bool encrypted = false;  // crypto_metadata or encrypted_column_metadata set
  ColumnMetaData meta_data;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t num_rows = 0;
};

struct FileMetaData {
  int32_t version = 0;
  std::vector<SchemaElement> schema;  // depth-first, the root first
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
  std::string created_by;
  bool encrypted = false;  // encryption_algorithm set (plaintext footer)
};

// Decodes a FileMetaData from the footer's bytes. DataLoss when they are not
// a valid one (truncated, a required field missing, a count larger than
// the bytes could hold); the message says what and at which byte.
absl::StatusOr<FileMetaData> DecodeFileMetaData(std::string_view bytes);

}  // namespace pstrain::parquet
