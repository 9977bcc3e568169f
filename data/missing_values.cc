#include "data/missing_values.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr size_t kMaxTokens = 64;
constexpr size_t kMaxTokenBytes = 64;

std::string_view StripSpaces(std::string_view t) {
  while (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  while (!t.empty() && t.back() == ' ') t.remove_suffix(1);
  return t;
}

}  // namespace

const std::vector<std::string>& DefaultMissingTokens() {
  static const std::vector<std::string>* const kTokens =
      new std::vector<std::string>{"NA", "N/A", "NaN", "nan", "null", "NULL", "None", "?"};
  return *kTokens;
}

absl::Status ValidateMissingTokens(const std::vector<std::string>& tokens, char field_sep) {
  if (tokens.size() > kMaxTokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("missing_values: ", tokens.size(), " tokens, at most ", kMaxTokens));
  }
  for (const std::string& t : tokens) {
    if (t.size() > kMaxTokenBytes) {
      return absl::InvalidArgumentError(absl::StrCat("missing_values: \"",
                                                     absl::CHexEscape(t.substr(0, 16)),
                                                     "...\" is longer than ", kMaxTokenBytes,
                                                     " bytes"));
    }
    if (t.find_first_of(std::string("\n\r\"") + field_sep) != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing_values: \"", absl::CHexEscape(t),
                       "\" holds the separator, a line break or a double quote"));
    }
  }
  return absl::OkStatus();
}

MissingTokens::MissingTokens(const std::vector<std::string>& tokens) {
  for (const std::string& t : tokens) {
    std::string_view s = StripSpaces(t);
    if (s.empty()) continue;  // the empty token is always missing
    tokens_.emplace_back(s);
    max_size_ = std::max(max_size_, s.size());
    may_start_[static_cast<unsigned char>(s.front())] = true;
  }
  limit_ = max_size_ + kMaxPadding;
}

bool MissingTokens::ContainsSlow(std::string_view token) const {
  token = StripSpaces(token);
  if (token.empty()) return true;  // spaces only
  if (token.size() > max_size_) return false;
  return std::find(tokens_.begin(), tokens_.end(), token) != tokens_.end();
}

}  // namespace pstrain::worker
