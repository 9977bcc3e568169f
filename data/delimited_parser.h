// DelimitedParser: the Parser (parser.h) of delimited text. Turns one text
// line into a ParsedRow (label, transformed dense values, feature ids per
// field): "label \t I1..In \t C1..Cm" in the Criteo layout, or any columns
// a custom schema describes (schema.h).
//
// Hot path of the readers: no allocation once the ParsedRow has grown to its
// working size, no copies of tokens, hand-written integer parsing. Every
// malformed line gives InvalidArgument with the reason; no input bytes can
// make it crash. Immutable after construction, so one parser may be shared
// by many threads (each with its own ParsedRow).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/missing_values.h"
#include "data/parser.h"
#include "data/schema.h"

namespace pstrain::worker {

class DelimitedParser final : public Parser {
 public:
  // InvalidArgument when the schema is invalid (see ValidateSchema).
  static absl::StatusOr<DelimitedParser> Create(const Schema& schema);

  // Parses `line` (without its '\n'; one trailing '\r' is ignored) into
  // `*row`. On error returns InvalidArgument saying what is wrong and where
  // (column name, e.g. "I3" or "C12"); `*row` is then unspecified.
  absl::Status Parse(std::string_view line, ParsedRow* row) const override;

  // Checks a header line (the first line of a file when schema.header)
  // against the schema's column names: InvalidArgument naming the first
  // column that differs. OK when the schema has no names.
  absl::Status CheckHeader(std::string_view line) const override;

  // The columns (0-based, in the line) of the dense and categorical fields
  // that `line` leaves missing (empty, or a missing token; a multi-hot
  // field with no token), in column order. For a line Parse() took;
  // `*scratch` is reused.
  void MissingColumns(std::string_view line, std::vector<std::string_view>* scratch,
                      std::vector<int>* columns) const override;

  const Schema& schema() const override { return schema_; }

 private:
  // What a column of a custom layout is.
  struct Role {
    enum Kind : uint8_t { kIgnore, kLabel, kDense, kSparse, kExtraLabel };
    Kind kind;
    // The common case, parsed inline in one pass: a 0/1 label, a dense
    // column of log1p_clamp'ed integers, a single-hot categorical column.
    bool fast = false;
    uint32_t index = 0;    // kDense, kSparse: the field; kExtraLabel: which
    uint64_t buckets = 0;  // kSparse: its hash_buckets
    uint32_t hash_field = 0;  // kSparse: the field whose ids its tokens take
  };

  // How a dense column's integer values are transformed without the
  // general path (none: clipped columns).
  enum class IntegerPath : uint8_t { kNone, kLog1pClamp, kLog1p, kOther };

  explicit DelimitedParser(const Schema& schema);

  absl::Status ParseCustom(std::string_view line, ParsedRow* row) const;
  // The common cases of a column, inline; false: not one (CustomColumn
  // parses it, or says what is wrong).
  bool FastColumn(const Role& role, std::string_view token, ParsedRow* row) const;
  absl::Status CustomColumn(int column, std::string_view token, ParsedRow* row) const;
  absl::Status CustomLabel(std::string_view token, ParsedRow* row) const;
  // One of the schema's extra_labels: NaN (none) when empty or missing.
  absl::Status CustomExtraLabel(int k, std::string_view token, ParsedRow* row) const;
  absl::Status CustomDense(int field, std::string_view token, ParsedRow* row) const;
  void CustomSparse(int field, std::string_view token, ParsedRow* row) const;
  // A time part's dense value or categorical id (the column's timestamp).
  absl::Status TimeDense(int field, std::string_view token, ParsedRow* row) const;
  absl::Status TimeSparse(int field, std::string_view token, ParsedRow* row) const;
  absl::Status CustomColumnCountError(std::string_view line, size_t columns) const;
  absl::Status ColumnCountError(std::string_view line) const;
  // The ids of one categorical field's token (a multi-hot one's tokens).
  void AppendIds(int field, std::string_view token, uint64_t buckets, char multi_hot_sep,
                 ParsedRow* row) const;

  Schema schema_;
  std::vector<Role> roles_;  // custom layout: [num_columns]
  std::vector<IntegerPath> integer_path_;  // [num_dense]
  std::vector<float> missing_value_;       // [num_dense]: MissingValue(), transformed
  MissingTokens missing_;
  bool sparse_in_order_ = true;
  // The dense fields that are time parts (their columns have no role: a
  // column may give several parts); any makes the parser split lines first.
  std::vector<int> time_dense_;
};

// Splits `line` at `sep` into `*columns`; a column that starts with a
// double quote runs to the closing quote (it may hold `sep`), and comes back
// without the quotes (a doubled quote inside stays doubled).
void SplitColumns(std::string_view line, char sep, std::vector<std::string_view>* columns);

// Parses a decimal number (e.g. "-1.5e3", "42"); an empty token is
// `missing`. False for anything else, infinities and NaN included.
bool ParseNumber(std::string_view token, double missing, double* out);

// Parses a decimal integer with an optional sign; an empty token is 0.
// Returns false for anything else (spaces, other characters, more than 18
// digits).
bool ParseInt64(std::string_view token, int64_t* out);

}  // namespace pstrain::worker
