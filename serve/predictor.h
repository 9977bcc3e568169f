// Scoring with an exported model (`pstrain predict`): one process, no
// cluster. Ids the model never saw get the rows the servers would have
// created for them (the tables' deterministic initializers), exactly as in
// evaluation during training.
//
// The output keeps the input's rows aligned: one line per input line (a
// header line aside), in order, over the files in the order their patterns
// match them. A line that parses gets its click probability; a line that
// does not gets an empty prediction and, after a tab, why (a blank line's
// reason is "blank line"), or, with OnBadLine::kFail, fails the whole run
// naming FILE:LINE. `paste data.tsv scores.tsv` pairs them up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/eval/metrics.h"
#include "model/models/head_eval.h"

namespace pstrain::worker {

enum class OnBadLine { kMark, kFail };

struct PredictOptions {
  std::string model_dir;
  std::vector<std::string> data;  // paths or globs, same format as training
  std::string out;                // one line per input line ("" = none)
  int batch_size = 4096;
  OnBadLine on_bad_line = OnBadLine::kMark;
};

struct PredictResult {
  int64_t rows = 0;         // lines scored
  int64_t bad_lines = 0;    // lines that did not parse
  int64_t blank_lines = 0;  // empty lines (an empty prediction each)
  std::string first_bad;    // FILE:LINE: reason; the line: "..." ("" none)
  BinaryMetrics metrics;    // of the scored lines, against their labels (the first head's)
  std::vector<HeadEval> heads;  // a model of several heads: each head's, in its columns' order
  double seconds = 0;
};

// Errors: the model's (NotFound, DataLoss...), the files' (NotFound, I/O,
// DataLoss for corrupt compressed data), InvalidArgument for input that is
// not in the model's layout (its first lines do not parse: the separator it
// seems to use is named; a header that differs from the schema's), or, with
// kFail, for the first bad line (FILE:LINE, the reason, the line quoted).
absl::StatusOr<PredictResult> PredictFile(const PredictOptions& options);

}  // namespace pstrain::worker
