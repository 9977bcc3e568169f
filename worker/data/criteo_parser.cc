#include "worker/data/criteo_parser.h"

#include <cstring>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr size_t kSnippetBytes = 48;

// A short, printable excerpt of untrusted bytes for error messages.
std::string Snippet(std::string_view s) {
  bool cut = s.size() > kSnippetBytes;
  std::string out = absl::CHexEscape(absl::string_view(s.data(), cut ? kSnippetBytes : s.size()));
  if (cut) out += "...";
  return out;
}

std::string ColumnName(const Schema& schema, int column) {
  if (column == 0) return "label";
  if (column <= schema.num_dense) return absl::StrCat("I", column);
  return absl::StrCat("C", column - schema.num_dense);
}

// Finds the end of the token starting at `p`: the next separator, or `end`.
inline const char* TokenEnd(const char* p, const char* end, char sep) {
  if (p >= end) return end;
  const void* hit = std::memchr(p, sep, static_cast<size_t>(end - p));
  return hit == nullptr ? end : static_cast<const char*>(hit);
}

}  // namespace

bool ParseInt64(std::string_view token, int64_t* out) {
  const char* p = token.data();
  const char* end = p + token.size();
  if (p == end) {
    *out = 0;
    return true;
  }
  bool negative = false;
  if (*p == '-' || *p == '+') {
    negative = *p == '-';
    ++p;
  }
  size_t digits = static_cast<size_t>(end - p);
  if (digits == 0 || digits > 18) return false;
  uint64_t v = 0;
  for (; p < end; ++p) {
    unsigned d = static_cast<unsigned char>(*p) - static_cast<unsigned>('0');
    if (d > 9) return false;
    v = v * 10 + d;
  }
  *out = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

absl::StatusOr<CriteoParser> CriteoParser::Create(const Schema& schema) {
  absl::Status s = ValidateSchema(schema);
  if (!s.ok()) return s;
  return CriteoParser(schema);
}

absl::Status CriteoParser::ColumnCountError(std::string_view line) const {
  size_t columns = 1;
  for (char c : line) columns += (c == schema_.field_sep);
  return absl::InvalidArgumentError(absl::StrCat("wrong number of columns: ", columns,
                                                 ", want ", NumColumns(schema_), " in \"",
                                                 Snippet(line), "\""));
}

absl::Status CriteoParser::Parse(std::string_view line, ParsedRow* row) const {
  if (line.size() > schema_.max_line_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("line of ", line.size(),
                                                   " bytes exceeds max_line_bytes ",
                                                   schema_.max_line_bytes));
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const char sep = schema_.field_sep;
  const int num_dense = schema_.num_dense;
  const int num_sparse = schema_.num_sparse;
  const int last_column = num_dense + num_sparse;
  const char* p = line.data();
  const char* const end = p + line.size();

  // Returns the end of column `c` starting at p; nullptr when the line has
  // too few (or, for the last column, too many) separators.
  auto column_end = [&](int c) -> const char* {
    const char* e = TokenEnd(p, end, sep);
    if (c < last_column) return e == end ? nullptr : e;
    return e == end ? e : nullptr;
  };

  // Label.
  const char* e = column_end(0);
  if (e == nullptr) return ColumnCountError(line);
  if (e - p != 1 || (*p != '0' && *p != '1')) {
    return absl::InvalidArgumentError(
        absl::StrCat("label must be 0 or 1, got \"", Snippet(std::string_view(p, e - p)), "\""));
  }
  row->label = *p == '1' ? 1.0f : 0.0f;
  p = e + (e < end);

  row->dense.resize(num_dense);
  for (int j = 0; j < num_dense; ++j) {
    e = column_end(1 + j);
    if (e == nullptr) return ColumnCountError(line);
    int64_t v;
    if (!ParseInt64(std::string_view(p, e - p), &v)) {
      return absl::InvalidArgumentError(absl::StrCat("column ", ColumnName(schema_, 1 + j),
                                                     ": not an integer: \"",
                                                     Snippet(std::string_view(p, e - p)), "\""));
    }
    row->dense[j] = DenseTransform(v);
    p = e + (e < end);
  }

  row->ids.clear();
  row->field_end.resize(num_sparse);
  const uint64_t buckets = schema_.hash_buckets;
  const char multi = schema_.multi_hot_sep;
  for (int f = 0; f < num_sparse; ++f) {
    e = column_end(1 + num_dense + f);
    if (e == nullptr) return ColumnCountError(line);
    if (multi == 0) {
      row->ids.push_back(FeatureId(f, std::string_view(p, e - p), buckets));
    } else {
      size_t before = row->ids.size();
      for (const char* q = p; q < e;) {
        const char* qe = TokenEnd(q, e, multi);
        if (qe > q) row->ids.push_back(FeatureId(f, std::string_view(q, qe - q), buckets));
        q = qe + 1;
      }
      if (row->ids.size() == before) row->ids.push_back(MissingId(f, buckets));
    }
    row->field_end[f] = static_cast<uint32_t>(row->ids.size());
    p = e + (e < end);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
