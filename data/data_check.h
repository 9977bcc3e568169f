// CheckDataFiles: a quick look at a job's input before anything starts, so
// that a wrong path or format fails in a second instead of after the
// cluster started (or, for eval data, after training finished).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "data/schema.h"

namespace pstrain::worker {

struct DataCheckOptions {
  std::string flag;       // named in errors, e.g. "--train_data"
  int lines_to_check = 5;  // the first lines of each file that are parsed
};

// OK when the patterns match files, they can be read, the data is not
// empty, and at least half of the first `lines_to_check` lines of each file
// parse with `schema` (a header line or a stray bad line is skipped later,
// as the readers do). Otherwise InvalidArgument (NotFound for a pattern
// that matches nothing) naming the flag and the first bad line as
// FILE:LINE, its reason (with the separator the file seems to use when a
// line is one field and the layout has more) and the line quoted.
// Compressed files (gzip, zstd) are decompressed as the readers do; one
// whose first lines cannot be decoded (corrupt, truncated) is DataLoss
// naming the flag, the file and the decoder's reason.
absl::Status CheckDataFiles(const std::vector<std::string>& patterns, const Schema& schema,
                            const DataCheckOptions& options);

}  // namespace pstrain::worker
