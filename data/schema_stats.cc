// ComputeDenseStats (schema_file.h): the first pass that takes the
// statistics of standardized columns.
#include <spdlog/spdlog.h>

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/file_set.h"
#include "data/schema_file.h"
#include "data/shard_scanner.h"

namespace pstrain::worker {

absl::Status ComputeDenseStats(const std::vector<std::string>& patterns, int64_t max_rows,
                               Schema* schema) {
  std::vector<int> need;
  for (size_t j = 0; j < schema->dense.size(); ++j) {
    const DenseColumn& d = schema->dense[j];
    if (d.transform == Transform::kStandardize && !d.has_stats) need.push_back(static_cast<int>(j));
  }
  if (need.empty()) return absl::OkStatus();
  // The raw (clipped) values: the same schema without the transforms, a
  // missing value NaN: the statistics are those of the values present.
  Schema raw = *schema;
  for (DenseColumn& d : raw.dense) {
    d.transform = Transform::kNone;
    d.missing = std::numeric_limits<double>::quiet_NaN();
    d.missing_given = true;
  }
  PS_ASSIGN_OR_RETURN(std::vector<InputFile> files, ExpandFilePatterns(patterns));
  std::vector<FileRange> ranges = ShardRanges(files, 0, 1);
  ScannerOptions so;
  so.schema = raw;
  so.max_bad_lines_fraction = 1.0;  // the training run itself applies the limit
  so.max_logged_bad_lines = 0;
  PS_ASSIGN_OR_RETURN(auto scanner, ShardScanner::Create(std::move(files), std::move(ranges), so));
  std::vector<double> mean(need.size(), 0), m2(need.size(), 0);
  std::vector<int64_t> count(need.size(), 0);
  ParsedRow row;
  int64_t n = 0;
  while (n < max_rows) {
    PS_ASSIGN_OR_RETURN(bool more, scanner->NextRow(&row));
    if (!more) break;
    ++n;
    for (size_t k = 0; k < need.size(); ++k) {
      double x = row.dense[need[k]];
      if (std::isnan(x)) continue;  // missing
      ++count[k];
      double delta = x - mean[k];
      mean[k] += delta / static_cast<double>(count[k]);
      m2[k] += delta * (x - mean[k]);
    }
  }
  if (n == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "standardize: no rows to take the statistics of column ",
        schema->dense[need[0]].name, " from (give \"mean\" and \"stddev\")"));
  }
  for (size_t k = 0; k < need.size(); ++k) {
    DenseColumn& d = schema->dense[need[k]];
    if (count[k] == 0) {
      spdlog::warn("standardize: column {} has no value in the first {} rows: mean 0, stddev 1",
                   d.name, n);
    }
    const int64_t c = count[k];
    double sd = c > 1 ? std::sqrt(m2[k] / static_cast<double>(c - 1)) : 0.0;
    d.mean = mean[k];
    d.stddev = sd > 0 && std::isfinite(sd) ? sd : 1.0;
    d.has_stats = true;
  }
  spdlog::info("standardize: mean and stddev of {} column{} from the first {} rows", need.size(),
               need.size() == 1 ? "" : "s", n);
  return absl::OkStatus();
}

}  // namespace pstrain::worker
