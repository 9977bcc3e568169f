// SchemaColumns: the column names a schema file refers to and where they
// come from: its "columns", the first Parquet file's schema or the first
// text file's header line, and the "partition_columns" after them; and a
// reference to a column (a name or a 0-based index) resolved against them,
// with errors that say where the names came from (and, for a header of one
// column, which separator it seems to use). Part of reading a schema file
// (schema_file.cc), whose Schema it fills in: column_names,
// partition_columns, and parquet / header once a file shows it is Parquet.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "data/schema.h"

namespace pstrain::worker {

class SchemaColumns {
 public:
  // `schema` (the one being read; its separator, header, format and
  // max_line_bytes already set) outlives this; `saved`: the schema of a
  // saved model (its partition values are not looked for in the data).
  SchemaColumns(std::string source, const std::vector<std::string>& data_patterns, bool saved,
                Schema* schema)
      : source_(std::move(source)), patterns_(data_patterns), saved_(saved), s_(schema) {}

  // The names: "columns", else the first data file's (Parquet, or a text
  // header); none when neither says (columns then go by index).
  absl::Status Read(const nlohmann::json& j);
  // "partition_columns": appended to the names, after the files' columns.
  absl::Status Partitions(const nlohmann::json& j);
  // The index of the column `ref` names at `where` (for messages).
  absl::StatusOr<int> Resolve(const nlohmann::json& ref, const std::string& where);

  // The largest index resolved so far (-1: none).
  int max_index() const { return max_index_; }
  // The column is a Parquet LIST (multi-hot without a separator).
  bool IsParquetList(int column) const {
    return column >= 0 && static_cast<size_t>(column) < parquet_lists_.size() &&
           parquet_lists_[static_cast<size_t>(column)];
  }

 private:
  template <typename... Parts>
  absl::Status Bad(const Parts&... parts) const {
    return absl::InvalidArgumentError(absl::StrCat("schema ", source_, ": ", parts...));
  }
  // Appended to "no column" errors: the separator the header seems to use.
  std::string HeaderHint() const;

  const std::string source_;
  const std::vector<std::string>& patterns_;
  const bool saved_;
  Schema* const s_;
  std::string header_line_;  // the header the names came from ("" none)
  std::string names_from_;   // where the names came from, for messages
  std::vector<bool> parquet_lists_;
  int max_index_ = -1;
};

}  // namespace pstrain::worker
