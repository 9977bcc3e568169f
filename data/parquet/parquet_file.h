// ParquetFile: a Parquet file opened for reading, column chunk by column
// chunk (the format layer of issue 40; the schema/parser/reader integration
// sits above it).
//
// Open() reads and checks the footer: the "PAR1" magic at both ends, the
// footer length within the file, the FileMetaData (thrift_compact.h
// explains why it is decoded by hand), the schema (schema_tree.h), and each
// column chunk's metadata: its type and path against the schema, its byte
// range within the file's data. ReadColumn() then reads only the bytes of
// the one chunk asked for (projection) with pread(2) and decodes them
// (column_reader.h).
//
// Supported: the physical types BOOLEAN, INT32, INT64, INT96 (legacy
// timestamps, converted to nanoseconds since the epoch), FLOAT, DOUBLE,
// BYTE_ARRAY, FIXED_LEN_BYTE_ARRAY; flat columns and LIST columns
// (column.h); codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4_RAW, BROTLI; the
// encodings of value_decoder.h; data pages v1 and v2; page CRCs. Refused
// with Unimplemented, naming the feature: structs, maps and nested lists
// (per column: the other columns stay readable), LZ4 (Hadoop framing) and
// LZO, encrypted files, chunks stored in other files, BIT_PACKED levels.
//
// Every error names the file, and for ReadColumn the row group, the column
// and the page (index and byte offset), e.g. `flights.parquet: row group 3,
// column "origin", page 2 at byte 81234: snappy data is corrupt`. No file
// content makes it crash, abort, or allocate beyond the bounds of
// ReadOptions and the size of the file.
//
// Immutable after Open; ReadColumn is thread-safe (each thread with its own
// ColumnData).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/parquet/column.h"

namespace pstrain::parquet {

struct FileMetaData;

class ParquetFile {
 public:
  // Opens the file at `path`. NotFound etc. when it cannot be opened or
  // read; DataLoss when it is not a valid Parquet file; Unimplemented for an
  // encrypted one.
  static absl::StatusOr<std::unique_ptr<ParquetFile>> Open(const std::string& path,
                                                           const ReadOptions& options = {});
  // A file held in memory (tests, fuzzing); `name` is for errors.
  static absl::StatusOr<std::unique_ptr<ParquetFile>> FromBuffer(std::string bytes,
                                                                 std::string name,
                                                                 const ReadOptions& options = {});
  ~ParquetFile();
  ParquetFile(const ParquetFile&) = delete;
  ParquetFile& operator=(const ParquetFile&) = delete;

  const std::string& name() const { return name_; }
  const std::string& created_by() const { return created_by_; }
  int64_t file_size() const { return file_size_; }

  // One per leaf of the schema, in the order of the column chunks.
  const std::vector<ColumnDescriptor>& columns() const { return columns_; }
  // The index of the column named `name` (ColumnDescriptor::name), -1 when
  // absent.
  int FindColumn(std::string_view name) const;

  int num_row_groups() const { return static_cast<int>(row_groups_.size()); }
  // The sum of the row groups' rows.
  int64_t num_rows() const { return num_rows_; }
  // REQUIRES: 0 <= rg < num_row_groups().
  int64_t row_group_num_rows(int rg) const { return row_groups_[rg].num_rows; }

  // The bytes of column `col` of row group `rg` in the file: the pages that
  // ReadColumn(rg, col) reads, and nothing else.
  struct ByteRange {
    int64_t offset = 0;
    int64_t size = 0;
  };
  // REQUIRES: valid rg and col.
  ByteRange chunk_range(int rg, int col) const { return row_groups_[rg].chunks[col].range; }

  // Decodes column `col` of row group `rg` into `*out` (see ColumnData),
  // reading only that chunk's bytes. InvalidArgument for indices out of
  // range; Unimplemented for a column of `unsupported` shape or a codec or
  // encoding this reader does not support; DataLoss for corrupt data;
  // ResourceExhausted past a limit of ReadOptions; the read error of the
  // file. `*out` is unspecified after an error.
  absl::Status ReadColumn(int rg, int col, ColumnData* out) const;

 private:
  struct Chunk {
    ByteRange range;
    int32_t codec = 0;
    int64_t num_values = 0;
  };
  struct RowGroupInfo {
    int64_t num_rows = 0;
    std::vector<Chunk> chunks;
  };

  ParquetFile(std::string name, const ReadOptions& options);
  // Reads size bytes at offset: a view into the buffer of FromBuffer, or
  // into *scratch.
  absl::StatusOr<std::string_view> ReadBytes(int64_t offset, int64_t size,
                                             std::string* scratch) const;
  absl::Status Init();
  absl::Status InitRowGroups(const FileMetaData& md, int64_t data_end);

  const std::string name_;
  const ReadOptions options_;
  int fd_ = -1;         // Open
  std::string buffer_;  // FromBuffer
  int64_t file_size_ = 0;
  std::string created_by_;
  std::vector<ColumnDescriptor> columns_;
  std::vector<RowGroupInfo> row_groups_;
  int64_t num_rows_ = 0;
};

}  // namespace pstrain::parquet
