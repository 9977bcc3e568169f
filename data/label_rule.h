// A label's rule (LabelColumn): how a column's value becomes a row's 0/1
// label (a 0 or 1 as it is, or a comparison with a threshold, e.g. delay >
// 15), the comparisons' names, and the "NAME OP NUMBER" text a schema may
// write one as. Pure functions, shared by the schema reader, the saved
// schema and the parser.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/schema.h"

namespace pstrain::worker {

// The comparison's text: ">", ">=", "<", "<=", "==", "!=" ("" for kBinary).
const char* LabelOpName(LabelColumn::Op op);

// The comparison `text` names; InvalidArgument listing them.
absl::StatusOr<LabelColumn::Op> ParseLabelOp(absl::string_view text);

// Writes value v's label under `label`'s rule to *out (0 or 1). False when v
// is no label: a kBinary column's value other than 0 and 1.
bool ApplyLabelRule(const LabelColumn& label, double v, float* out);

// "delay > 15" as its parts.
struct LabelComparison {
  std::string column;  // as written (a name, or an index's digits)
  std::string op;      // as written, e.g. ">"
  double threshold = 0;
};

// The comparison a label's text writes, or nullopt for a plain column
// ("clicked"); InvalidArgument when the threshold is not a finite number.
absl::StatusOr<std::optional<LabelComparison>> ParseLabelComparison(absl::string_view text);

}  // namespace pstrain::worker
