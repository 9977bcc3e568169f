// Schema files: a JSON description of any delimited click log (separator,
// header, label column or threshold, dense columns with their transforms,
// categorical columns with their hash sizes, multi-hot separators and
// pooling, columns to ignore), resolved against the data into a Schema
// (schema.h). The same JSON, with every column resolved, is what a saved
// model records, so that `predict` and `serve` read their input the same way.
// docs/schema.md is the reference of the format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "data/schema.h"

namespace pstrain::worker {

struct SchemaFile {
  Schema schema;
  int embedding_dim = 0;      // "embedding_dim"; 0: not given (the model's flag)
  int64_t stats_rows = 100000;  // rows of the first pass for standardize
};

// Parses schema file `path`. Column names come from "columns", or, when
// "header" is true and the file names columns, from the first line of the
// first file `data_patterns` match. `default_buckets` is the hash size of a
// categorical column that gives none (--hash_buckets). Errors
// (InvalidArgument) name the file and the key, e.g.
//   schema s.json: dense[2]: no column "pric" in the header of a.csv (did you mean "price"?)
absl::StatusOr<SchemaFile> LoadSchemaFile(const std::string& path,
                                          const std::vector<std::string>& data_patterns,
                                          uint64_t default_buckets);

// The same, from JSON text (`source` names it in errors).
absl::StatusOr<SchemaFile> ParseSchemaJson(const std::string& text, const std::string& source,
                                           const std::vector<std::string>& data_patterns,
                                           uint64_t default_buckets);

// Fills the mean and stddev of every standardized column that has none
// from the first `max_rows` good rows of `patterns` (all files, in order;
// the same on every worker). A column with stddev 0 gets stddev 1.
absl::Status ComputeDenseStats(const std::vector<std::string>& patterns, int64_t max_rows,
                               Schema* schema);

// A custom schema as JSON, every column by index and every statistic
// given: SchemaFromJson(SchemaJson(s)) == s. For saved models.
nlohmann::json SchemaJson(const Schema& schema);
absl::StatusOr<Schema> SchemaFromJson(const nlohmann::json& json, const std::string& source);

// Human-readable names of the enums, as the schema file spells them.
const char* TransformName(Transform t);
const char* PoolingName(BagPooling p);

}  // namespace pstrain::worker
