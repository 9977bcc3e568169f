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
#include "data/batch_builder.h"
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

  // The columnar path: the next good rows of the range, at most
  // `max_rows`, converted column by column straight into the batch that
  // `builder` is building (no ParsedRow, no BatchBuilder::Append a row):
  // the same rows, ids and values as Next() gives, in the same order.
  // `rows` is how many were appended; `*bad` is set (and `rows` are the
  // good rows before it) when the row after them is bad: Where() then names
  // it, as after Next(). `end` (with no rows): the range has no more rows.
  // A call may append fewer than `max_rows` good rows and stop at the end
  // of a row group; only a call that appends nothing, finds no bad row and
  // not the end means that the batch is full. Errors: as Next().
  absl::StatusOr<RowsAppended> AppendRows(BatchBuilder* builder, int64_t max_rows,
                                          std::string* bad);

  // "FILE: row group G, row R" of the row last returned (R 1-based within
  // the row group), for bad-row messages.
  std::string Where() const;

  // Where the next row is: row `*row` (0-based) of the file's row group
  // `*row_group`; false when the range has no more rows.
  bool Position(int32_t* row_group, int64_t* row) const;
  // Right after Open: the range's rows before row `row` of row group
  // `row_group` are not read (not decoded; the rows before `row` of that
  // group are, and dropped). InvalidArgument naming the file when the range
  // has no such row group or it fewer rows.
  absl::Status Seek(int32_t row_group, int64_t row);
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
  // Loads the next row group when the loaded one has no rows left: false
  // after the last of the range.
  absl::StatusOr<bool> EnsureRows();
  void ConvertBlock(int64_t first, int64_t size);
  // Rows [r0, r0 + n) of the loaded row group, one role at a time, into
  // caller's arrays; `bad[i]` (initialised to -1) takes the first role
  // that makes row r0 + i bad (as Block::bad).
  // The labels into label[n] and extra[n x extra labels].
  void ConvertLabels(int64_t r0, int64_t n, float* label, float* extra, int32_t* bad);
  // Dense column j: row i's value at out[i * stride].
  void ConvertDense(int j, int64_t r0, int64_t n, float* out, size_t stride, int32_t* bad);
  // Sparse field f when it has one id a row (OneIdARow): row i's at
  // out[i * stride].
  void ConvertSparseOne(int f, int64_t r0, int64_t n, uint64_t* out, size_t stride);
  // Sparse field f, any shape: row i's ids appended to `*ids`, and
  // ends[i] = ids->size() after them. Returns the rows converted: n, or
  // the first row that would take `*ids` past `max_ids` (not appended).
  int64_t ConvertSparseBag(int f, int64_t r0, int64_t n, size_t max_ids,
                           std::vector<uint64_t>* ids, uint32_t* ends, int32_t* bad);
  // Whether sparse field f has exactly one id a row (no list, multi_hot
  // or time part) in the loaded row group.
  bool OneIdARow(int f) const;
  static void MarkBad(int32_t* bad, int64_t i, int32_t role) {
    if (bad[i] < 0) bad[i] = role;
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
  int64_t seek_row_ = 0;         // Seek's row, for the next group loaded
  // By role: the label, the extra labels, dense and sparse fields.
  Bound label_;
  std::vector<Bound> extra_;
  std::vector<Bound> dense_;
  std::vector<Bound> sparse_;
  Block block_;
  // The columnar path's bad-row marks of rows [known_first_, known_end_) of
  // the loaded row group (-1: good), kept so that the good rows after a
  // bad one are converted again without their marks being recomputed.
  std::vector<int32_t> known_bad_;
  int64_t known_first_ = 0, known_end_ = 0;
  std::vector<int32_t> run_bad_;  // scratch
  std::string token_;  // scratch
};

}  // namespace pstrain::worker
