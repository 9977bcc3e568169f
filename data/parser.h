// Parser: turns one record of the input (a line of text) into a ParsedRow,
// the row the batch builder takes: the label, the transformed dense values
// and the feature ids of every categorical field. The readers, the data
// check, `pstrain predict` and the model server parse through it and never
// name a format; CreateParser picks the implementation from the schema.
// Today there is one: DelimitedParser (delimited_parser.h), the Criteo
// layout or any delimited table a schema file describes.
//
// Implementations are immutable after construction, so one parser may be
// shared by many threads (each with its own ParsedRow).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/schema.h"

namespace pstrain::worker {

// One parsed record. Reused across records to avoid allocations.
struct ParsedRow {
  float label = 0.0f;
  // The schema's extra_labels, [extra_labels.size()]; NaN: the row has none.
  std::vector<float> extra_labels;
  std::vector<float> dense;  // [num_dense], already transformed
  // The ids of every sparse field, field after field: field f owns
  // ids[f == 0 ? 0 : field_end[f - 1] .. field_end[f]); at least one each.
  std::vector<uint64_t> ids;
  std::vector<uint32_t> field_end;  // [num_sparse]
  // Scratch of the custom layout: the line's columns.
  std::vector<std::string_view> columns;
  // The values of the schema's partition columns for the file the record
  // comes from (file_set.h PartitionValues), set by whoever reads files.
  // Null: the record holds them itself, as its last columns (a row sent to
  // `pstrain serve`).
  const std::vector<std::string>* partition = nullptr;

  uint32_t field_begin(int f) const { return f == 0 ? 0 : field_end[f - 1]; }
};

class Parser {
 public:
  virtual ~Parser() = default;

  // Parses `record` (a line without its '\n'; one trailing '\r' is
  // ignored) into `*row`. On error returns InvalidArgument saying what is
  // wrong and where (the column's name, e.g. "I3" or "C12"); `*row` is then
  // unspecified.
  virtual absl::Status Parse(std::string_view record, ParsedRow* row) const = 0;

  // Checks a header line (the first line of a file when schema().header)
  // against the schema's column names: InvalidArgument naming the first
  // column that differs. OK when the schema has no names.
  virtual absl::Status CheckHeader(std::string_view line) const = 0;

  // The columns (0-based, in the record) of the dense and categorical
  // fields that `record` leaves missing (empty, or a missing token; a
  // multi-hot field with no token), in column order. For a record Parse()
  // took; `*scratch` is reused.
  virtual void MissingColumns(std::string_view record, std::vector<std::string_view>* scratch,
                              std::vector<int>* columns) const = 0;

  virtual const Schema& schema() const = 0;
};

// The parser of `schema`'s records (delimited text: the only format so
// far). InvalidArgument when the schema is invalid (see ValidateSchema).
absl::StatusOr<std::unique_ptr<const Parser>> CreateParser(const Schema& schema);

}  // namespace pstrain::worker
