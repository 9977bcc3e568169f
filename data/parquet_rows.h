// ParquetRows: the rows of a Parquet file as the parser's ParsedRows, for
// the shard scanner (shard_scanner.h) to hand out like parsed text lines.
//
// The schema names columns; each file's columns are found by name (files of
// one data set may order them differently), and only those are read
// (projection). A shard reads the row groups whose first byte lies in its
// byte range (file_set.h), so shards split a file by row group and every row
// is read exactly once. Values become what the same value written as text
// would: a categorical integer's id is its decimal text's, a string's its
// bytes'; a time part (the schema's "time") is taken from a TIMESTAMP,
// DATE or INT96 column, whole seconds, or text; a null is the column's
// missing value (its missing id, or its dense missing value); a LIST column
// is a multi-hot bag (its max_length kept from the end), and a multi_hot
// string column is split at the schema's separator, as text is; a string
// equal to a missing token is missing, as in text.
// A row without a label, or with a dense string that is not a number, is a
// bad row (NextRow's `bad`), counted with the text path's bad lines.
//
// Rows are converted a block at a time, column by column (each column's
// values read in order, its ids hashed in one loop), then handed out row by
// row: the same values as row by row, at a fraction of the cache misses.
// Dictionary-encoded string columns are read as indices into their
// dictionary (ReadOptions::keep_dictionary): a categorical one hashes each
// dictionary entry once a row group, and a row's id is a look-up.
//
// Owned and used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/missing_values.h"
#include "data/parquet/column.h"
#include "data/parquet/parquet_file.h"
#include "data/parser.h"
#include "data/schema.h"

namespace pstrain::worker {

class ParquetRows {
 public:
  // REQUIRES: schema.custom with column_names (ValidateSchema'd).
  explicit ParquetRows(const Schema& schema);
  ~ParquetRows();

  // Opens `path` for the row groups whose first byte lies in [begin, end)
  // and binds the schema's columns to the file's. NotFound etc. for the
  // file; DataLoss when it is not valid Parquet; InvalidArgument naming the
  // file and column when a column is missing or of a type its role cannot
  // take (a string label; a list as a dense column); Unimplemented for a
  // column the reader cannot decode.
  absl::Status Open(const std::string& path, uint64_t begin, uint64_t end);
  void Close();

  // The first bytes of the row groups with rows in the file at `path`, in
  // file order: Open(path, b, e) reads those in [b, e). For cutting a range
  // into units of one row group each. Errors: Open's for the file.
  static absl::StatusOr<std::vector<uint64_t>> RowGroupStarts(const std::string& path);

  // The next row into `*row`: true, or false after the last row of the
  // range. A row that cannot be a training row comes back with `*bad` set
  // to why (and `*row` unspecified). Errors: a row group that cannot be
  // decoded (DataLoss, Unimplemented), naming file, row group and column.
  absl::StatusOr<bool> Next(ParsedRow* row, std::string* bad);

  // "FILE: row group G, row R" of the row last returned (R 1-based within
  // the row group), for bad-row messages.
  std::string Where() const;
  const std::string& path() const { return path_; }
  // Rows of the open range not yet returned (for the bad-row judgement).
  int64_t RowsLeft() const;

 private:
  // A schema column bound to a file column.
  struct Bound {
    int file_column = -1;
    // Its column's description: the file's, or for a partition column
    // (`partition` >= 0, its index in the schema's partition_columns) a
    // string column made of the file's folder name KEY=VALUE.
    const parquet::ColumnDescriptor* desc = nullptr;
    int partition = -1;
    parquet::ColumnData data;
    // A sparse string column in the dictionary form: the id of each entry
    // of the loaded chunk's dictionary ([dict_size() + 1]; empty until the
    // first block of the chunk computes them).
    std::vector<uint64_t> entry_ids;
  };
  // Rows [first, first + size) of the loaded row group, converted: what
  // Next() hands out. A bad row keeps the first of its roles (label 0,
  // dense j 1 + j, sparse f 1 + num_dense + f) that makes it bad.
  struct Block {
    int64_t first = 0;
    int64_t size = 0;
    std::vector<float> label;     // [size]
    std::vector<float> extra;     // [size x extra labels]
    std::vector<float> dense;     // [size x num_dense]
    // The ids of the fields with one id a row: [size x num_sparse].
    std::vector<uint64_t> row_ids;
    // The others' (lists, time parts): [num_sparse][ids of the rows], and
    // the end of each row's [num_sparse][size] (empty: in row_ids).
    std::vector<std::vector<uint64_t>> ids;
    std::vector<std::vector<uint32_t>> ends;
    bool one_id_a_row = true;     // every field's ids are in row_ids
    std::vector<int32_t> bad;     // [size]: -1, or the role
  };
  absl::Status LoadRowGroup(int rg);
  void ConvertBlock(int64_t first, int64_t size);
  void ConvertDense(int j);
  void ConvertSparse(int f);
  void MarkBad(int64_t i, int32_t role) {
    if (block_.bad[static_cast<size_t>(i)] < 0) block_.bad[static_cast<size_t>(i)] = role;
  }
  // Why row `r` is bad for role `role` (as Block::bad).
  std::string BadReason(int32_t role, int64_t r);
  // Slot `i` of column `b` as a number: false when it is null or a string
  // that is not a number.
  bool Number(const Bound& b, int64_t i, double* v) const;
  // Slot `i` of column `b` as the text a delimited file would hold.
  std::string_view Token(const Bound& b, int64_t i, std::string* scratch) const;
  // Slot `i` of column `b` as seconds since the epoch (a TIMESTAMP, DATE or
  // INT96 value, whole seconds, or a string ParseTimestamp reads): false
  // when it is null or not a time.
  bool Seconds(const Bound& b, int64_t i, int64_t* seconds) const;
  // Appends sparse field f's ids of row r to `*ids`; false for a time part
  // of something that is not a time.
  bool Sparse(int f, int64_t r, std::vector<uint64_t>* ids);

  const Schema schema_;
  const MissingTokens missing_;
  std::vector<float> missing_value_;  // [num_dense]
  std::string path_;
  std::unique_ptr<parquet::ParquetFile> file_;
  // The open file's values of the schema's partition columns, and the
  // description their columns read with.
  std::vector<std::string> partition_values_;
  parquet::ColumnDescriptor partition_desc_;
  std::vector<int> row_groups_;  // of the range, in order
  size_t next_group_ = 0;
  int group_ = -1;               // loaded, or -1
  int64_t group_rows_ = 0;
  int64_t next_row_ = 0;         // in the loaded group
  int64_t rows_left_after_ = 0;  // rows of the range's groups after the loaded one
  // By role: the label, the extra labels, dense and sparse fields.
  Bound label_;
  std::vector<Bound> extra_;
  std::vector<Bound> dense_;
  std::vector<Bound> sparse_;
  Block block_;
  std::string token_;  // scratch
};

}  // namespace pstrain::worker
