#include "data/bad_line.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain::worker {
namespace {

// The length of the valid UTF-8 sequence starting at s[i] (2 to 4), or 0.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (c >= 0xf5 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
  }
  return n;
}

}  // namespace

std::string QuoteLine(std::string_view text) {
  std::string out = "\"";
  size_t chars = 0, i = 0;
  for (; i < text.size() && chars < kQuotedLineChars; ++chars) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t n = Utf8Length(text, i);
      if (n > 0) {
        out.append(text.data() + i, n);
        i += n;
      } else {
        absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
        ++i;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\n': out += "\\n"; break;
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  if (i < text.size()) out += "...";
  return out;
}

std::string BadLineMessage(absl::string_view where, absl::string_view reason,
                           std::string_view text) {
  std::string out = absl::StrCat(where, ": ", reason);
  if (!text.empty()) out.append("; the line: ").append(QuoteLine(text));
  return out;
}

}  // namespace pstrain::worker
