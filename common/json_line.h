// JsonLine: builds one JSON object on one line, for metrics files and
// benchmark output. Keys are written in insertion order; non-finite numbers
// become null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace pstrain {

class JsonLine {
 public:
  JsonLine& Add(absl::string_view key, double value);
  JsonLine& Add(absl::string_view key, int64_t value);
  JsonLine& Add(absl::string_view key, int value) { return Add(key, static_cast<int64_t>(value)); }
  JsonLine& Add(absl::string_view key, uint64_t value);
  JsonLine& Add(absl::string_view key, absl::string_view value);
  JsonLine& Add(absl::string_view key, const char* value) { return Add(key, absl::string_view(value)); }
  JsonLine& Add(absl::string_view key, bool value);
  // Inserts `raw` (already valid JSON) as the value.
  JsonLine& AddRaw(absl::string_view key, absl::string_view raw);

  // "{...}" without a newline.
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(absl::string_view key);
  std::string body_;
};

// `s` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view s);

}  // namespace pstrain
