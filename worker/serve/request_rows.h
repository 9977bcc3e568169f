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
// Errors are InvalidArgument naming the row (1-based) and the column.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/batch.h"
#include "worker/data/criteo_parser.h"
#include "worker/data/schema.h"

namespace pstrain::worker {

class RequestRows {
 public:
  static absl::StatusOr<RequestRows> Create(const Schema& schema);

  // At most `max_rows` rows (InvalidArgument past it).
  absl::StatusOr<std::shared_ptr<const Batch>> ParseText(std::string_view body, int max_rows) const;
  absl::StatusOr<std::shared_ptr<const Batch>> ParseJson(std::string_view body, int max_rows) const;

  // The name a JSON row gives column `c` ("" for a column without one).
  const std::string& column_name(int c) const { return names_[c]; }

 private:
  explicit RequestRows(CriteoParser parser);

  // Parses one text row (label column optional) and appends it.
  absl::Status AddLine(std::string_view line, int row, ParsedRow* parsed, std::string* with_label,
                       class BatchBuilder* builder) const;

  CriteoParser parser_;
  int num_columns_ = 0;
  int label_column_ = 0;
  std::vector<std::string> names_;  // [num_columns]
  std::string header_;              // the header line the schema's names make ("" none)
};

}  // namespace pstrain::worker
