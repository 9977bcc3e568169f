// Edit distance (insertions, deletions, substitutions) between two names:
// how "did you mean" hints find the closest flag, field or column.
#pragma once

#include "absl/strings/str_cat.h"

#include <string>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/strings/string_view.h"

namespace pstrain {

inline size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean \"NAME\"?)" for the name of `names` closest to `name`
// when it is close enough to be a typo of it; "" otherwise.
template <typename Names>
std::string DidYouMeanQuoted(absl::string_view name, const Names& names) {
  std::string best;
  size_t best_d = std::max<size_t>(2, name.size() / 3) + 1;
  for (const auto& n : names) {
    const size_t d = EditDistance(name, n);
    if (d < best_d) {
      best_d = d;
      best = std::string(n);
    }
  }
  return best.empty() ? "" : absl::StrCat(" (did you mean \"", best, "\"?)");
}

}  // namespace pstrain
