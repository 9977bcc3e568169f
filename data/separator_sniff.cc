#include "data/separator_sniff.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "data/delimited_parser.h"

namespace pstrain::worker {
namespace {

struct Candidate {
  char sep;
  const char* schema_name;  // as a schema file's "separator" names it
  const char* flag_value;   // as --field_sep takes it
};

constexpr Candidate kCandidates[] = {{'\t', "tab", "tab"},
                                     {',', "comma", "comma"},
                                     {';', "semicolon", "';'"},
                                     {'|', "pipe", "'|'"},
                                     {' ', "space", "space"}};

size_t CountColumns(std::string_view line, char sep, std::vector<std::string_view>* scratch) {
  SplitColumns(line, sep, scratch);
  return scratch->size();
}

}  // namespace

char SniffSeparator(std::string_view line, char sep, size_t want) {
  std::vector<std::string_view> cols;
  const size_t have = CountColumns(line, sep, &cols);
  if (have == want) return 0;
  char best = 0;
  size_t best_count = 1;
  for (const Candidate& c : kCandidates) {
    if (c.sep == sep) continue;
    const size_t n = CountColumns(line, c.sep, &cols);
    if (n == want) return c.sep;
    // Spaces are in text too often to be a guess.
    if (have == 1 && c.sep != ' ' && n > best_count) {
      best = c.sep;
      best_count = n;
    }
  }
  return best;
}

std::string SeparatorName(char sep) {
  if (sep == '\t') return "'\\t'";
  return absl::StrCat("'", std::string(1, sep), "'");
}

std::string SeparatorAdvice(const Schema& schema, char sep) {
  const Candidate* found = nullptr;
  for (const Candidate& c : kCandidates) {
    if (c.sep == sep) found = &c;
  }
  if (schema.custom) {
    return absl::StrCat("set \"separator\": \"", found != nullptr ? found->schema_name
                                                                   : std::string(1, sep),
                        "\" in the schema");
  }
  return absl::StrCat("--field_sep=",
                      found != nullptr ? found->flag_value : absl::StrCat("'", std::string(1, sep), "'"),
                      ", or describe the columns with --schema");
}

std::string ColumnCountReason(const Schema& schema, std::string_view line, size_t fields) {
  const size_t want = static_cast<size_t>(NumColumns(schema));
  std::string reason = absl::StrCat(fields, fields == 1 ? " field" : " fields",
                                    schema.custom ? ", the schema expects " : ", the Criteo layout expects ",
                                    want);
  if (const char sep = SniffSeparator(line, schema.field_sep, want); sep != 0) {
    absl::StrAppend(&reason, "; the file seems to be separated by ", SeparatorName(sep), " (",
                    SeparatorAdvice(schema, sep), ")");
  }
  return reason;
}

}  // namespace pstrain::worker
