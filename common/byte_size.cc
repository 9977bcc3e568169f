#include "common/byte_size.h"

#include <cctype>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a byte size (a number of bytes, or with K, M, G or T: \"1GB\", "
        "\"512MiB\")"));
  };
  std::string s = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  std::string unit = std::string(absl::StripAsciiWhitespace(absl::string_view(s).substr(digits)));
  int shift = 0;
  if (!unit.empty()) {
    const absl::string_view prefixes = "kmgt";
    const size_t p = prefixes.find(unit[0]);
    if (unit == "b") {
      shift = 0;
    } else if (p != absl::string_view::npos &&
               (unit.size() == 1 || unit.substr(1) == "b" || unit.substr(1) == "ib")) {
      shift = 10 * static_cast<int>(p + 1);
    } else {
      return bad();
    }
  }
  double number;
  if (!absl::SimpleAtod(s.substr(0, digits), &number) || number < 0) return bad();
  const double bytes = number * static_cast<double>(uint64_t{1} << shift);
  if (bytes >= 9.2e18) return bad();
  return static_cast<uint64_t>(bytes);
}

}  // namespace pstrain
