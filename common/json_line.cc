#include "common/json_line.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pstrain {

std::string JsonQuote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  out += "\"";
  return out;
}

void JsonLine::Key(absl::string_view key) {
  if (!body_.empty()) body_ += ",";
  absl::StrAppend(&body_, JsonQuote(key), ":");
}

JsonLine& JsonLine::Add(absl::string_view key, double value) {
  Key(key);
  if (std::isfinite(value)) {
    absl::StrAppend(&body_, absl::StrFormat("%.6g", value));
  } else {
    body_ += "null";
  }
  return *this;
}

JsonLine& JsonLine::Add(absl::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonLine& JsonLine::Add(absl::string_view key, uint64_t value) {
  Key(key);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonLine& JsonLine::Add(absl::string_view key, absl::string_view value) {
  Key(key);
  body_ += JsonQuote(value);
  return *this;
}

JsonLine& JsonLine::Add(absl::string_view key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}

JsonLine& JsonLine::AddRaw(absl::string_view key, absl::string_view raw) {
  Key(key);
  absl::StrAppend(&body_, raw);
  return *this;
}

}  // namespace pstrain
