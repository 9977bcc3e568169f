// The rows of a prediction request (`pstrain serve`), parsed with the
// model's schema into a Batch, by the same parser as training and
// `pstrain predict`:
//   text:  one row per line in the training data's layout, with or without
//          the label column (its value is ignored); a header line equal to
//          the schema's column names is skipped; '\r\n' line ends are fine.
//   JSON:  {"rows": [{"<column>": value, ...}, ...]} with the schema's
//          column names (Criteo layout: I1..I13, C1..C26); a missing or
//          null column is an empty value; a list is a multi-hot value.
//          Or {"lines": ["<row as text>", ...]}.
// A dense or categorical column a row lacks (absent, null, empty, or a
// missing token) takes its missing value (missing_values.h) and is named
// in the batch's warnings. Errors are InvalidArgument naming the row
// (1-based) and the column.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch.h"
#include "data/parser.h"
#include "data/schema.h"

namespace pstrain::worker {

// The rows of one request and what the answer says about them.
struct RequestBatch {
  std::shared_ptr<const Batch> batch;
  // One per column some rows lacked, e.g. column "year" is missing in 1 of
  // 2 rows: scored with its training mean.
  std::vector<std::string> warnings;
};

class RequestRows {
 public:
  static absl::StatusOr<RequestRows> Create(const Schema& schema);

  // At most `max_rows` rows (InvalidArgument past it).
  absl::StatusOr<RequestBatch> ParseText(std::string_view body, int max_rows) const;
  absl::StatusOr<RequestBatch> ParseJson(std::string_view body, int max_rows) const;

  // The name a JSON row gives column `c` ("" for a column without one).
  const std::string& column_name(int c) const { return names_[c]; }

 private:
  explicit RequestRows(std::unique_ptr<const Parser> parser);

  // What one request's rows lacked: rows per column.
  struct Lacking {
    std::vector<int> rows;  // [num_columns]
    std::vector<int> columns;  // scratch
    std::vector<std::string_view> split;  // scratch
  };

  // Parses one text row (label column optional), appends it and counts the
  // columns it lacks.
  absl::Status AddLine(std::string_view line, int row, ParsedRow* parsed, std::string* with_label,
                       class BatchBuilder* builder, Lacking* lacking) const;
  std::vector<std::string> Warnings(const Lacking& lacking, int rows) const;
  // What a text row of too few `columns` lacks: the first column with no
  // value, or the separator the row seems to use.
  std::string TooFewHint(std::string_view line, size_t columns) const;

  std::unique_ptr<const Parser> parser_;
  int num_columns_ = 0;
  int label_column_ = 0;
  // Every label's column (the first, then the schema's "labels"), ascending:
  // a text row may leave them all out.
  std::vector<int> label_columns_;
  std::vector<std::string> names_;  // [num_columns]
  std::vector<std::string> scored_with_;  // [num_columns]: what a lacking column scores with
  std::string header_;              // the header line the schema's names make ("" none)
};

}  // namespace pstrain::worker
