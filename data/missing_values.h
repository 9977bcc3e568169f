// Missing values: the tokens that stand for "no value" in a field (NA, NaN,
// null...) and the value a dense column takes when its field holds none.
//
// The rule, the same in training, evaluation, `pstrain predict` and
// `pstrain serve` (they share the parser): a field is missing when it is
// empty or, spaces around it ignored, one of the schema's missing tokens
// (DefaultMissingTokens() unless the schema's "missing_values" replaces
// them); a field of spaces only is empty (a categorical one of a few spaces:
// longer, it is a token). A missing dense value is the column's `missing` when the schema
// gives one; else the training mean for a `standardize` column (0 after the
// transform); else 0, transformed like any value (log1p and log1p_clamp
// give 0). A missing categorical value is the field's missing id, as an
// empty token. docs/schema.md states it for users.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::worker {

// NA, N/A, NaN, nan, null, NULL, None and ?: what spreadsheets, pandas, R
// and SQL exports write for "no value".
const std::vector<std::string>& DefaultMissingTokens();

// OK when `tokens` can be missing tokens of a line split at `field_sep`:
// at most 64 of them, each at most 64 bytes, none holding the separator, a
// line break or a double quote. InvalidArgument naming the token otherwise.
absl::Status ValidateMissingTokens(const std::vector<std::string>& tokens, char field_sep);

// Whether a token is missing. Built once per parser; immutable, so shared
// by any number of threads. Cheap for the common case: a token longer than
// every missing token is rejected by its size.
class MissingTokens {
 public:
  MissingTokens() = default;  // only the empty token is missing
  explicit MissingTokens(const std::vector<std::string>& tokens);

  // Whether `token` is empty, or, spaces around it ignored, blank or one of
  // the tokens. A token longer than the longest one by more than
  // kMaxPadding is never missing: one compare rejects the common case.
  bool Contains(std::string_view token) const {
    if (token.size() > limit_) return false;
    if (token.empty()) return true;
    return may_start_[static_cast<unsigned char>(token.front())] && ContainsSlow(token);
  }

  static constexpr size_t kMaxPadding = 4;

 private:
  bool ContainsSlow(std::string_view token) const;

  std::vector<std::string> tokens_;  // non-empty, without spaces around
  size_t max_size_ = 0;
  size_t limit_ = kMaxPadding;  // max_size_ + kMaxPadding
  // The first bytes of the tokens, and the space: any other first byte is
  // no missing token (a hex id, a word, a number).
  std::array<bool, 256> may_start_ = Spaces();
  static std::array<bool, 256> Spaces() {
    std::array<bool, 256> a{};
    a[' '] = true;
    return a;
  }
};

}  // namespace pstrain::worker
