#include "data/label_rule.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr LabelColumn::Op kComparisons[] = {LabelColumn::Op::kGt, LabelColumn::Op::kGe,
                                            LabelColumn::Op::kLt, LabelColumn::Op::kLe,
                                            LabelColumn::Op::kEq, LabelColumn::Op::kNe};

}  // namespace

const char* LabelOpName(LabelColumn::Op op) {
  switch (op) {
    case LabelColumn::Op::kBinary: return "";
    case LabelColumn::Op::kGt: return ">";
    case LabelColumn::Op::kGe: return ">=";
    case LabelColumn::Op::kLt: return "<";
    case LabelColumn::Op::kLe: return "<=";
    case LabelColumn::Op::kEq: return "==";
    case LabelColumn::Op::kNe: return "!=";
  }
  return "";
}

absl::StatusOr<LabelColumn::Op> ParseLabelOp(absl::string_view text) {
  for (LabelColumn::Op op : kComparisons) {
    if (text == LabelOpName(op)) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not one of > >= < <= == !="));
}

bool ApplyLabelRule(const LabelColumn& label, double v, float* out) {
  bool on = false;
  switch (label.op) {
    case LabelColumn::Op::kBinary:
      if (v != 0.0 && v != 1.0) return false;
      on = v == 1.0;
      break;
    case LabelColumn::Op::kGt: on = v > label.threshold; break;
    case LabelColumn::Op::kGe: on = v >= label.threshold; break;
    case LabelColumn::Op::kLt: on = v < label.threshold; break;
    case LabelColumn::Op::kLe: on = v <= label.threshold; break;
    case LabelColumn::Op::kEq: on = v == label.threshold; break;
    case LabelColumn::Op::kNe: on = v != label.threshold; break;
  }
  *out = on ? 1.0f : 0.0f;
  return true;
}

absl::StatusOr<std::optional<LabelComparison>> ParseLabelComparison(absl::string_view text) {
  const size_t at = text.find_first_of("<>=!");
  if (at == absl::string_view::npos) return std::nullopt;
  const size_t op_end = text.find_first_not_of("<>=!", at);
  LabelComparison c;
  c.column = std::string(absl::StripAsciiWhitespace(text.substr(0, at)));
  c.op = std::string(text.substr(at, op_end == absl::string_view::npos ? absl::string_view::npos : op_end - at));
  const absl::string_view value =
      absl::StripAsciiWhitespace(op_end == absl::string_view::npos ? absl::string_view() : text.substr(op_end));
  if (!absl::SimpleAtod(value, &c.threshold) || !std::isfinite(c.threshold)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": \"", value, "\" is not a number (e.g. \"delay > 15\")"));
  }
  return c;
}

}  // namespace pstrain::worker
