// Progress reporting of a training run: a redrawn progress bar on a
// terminal, periodic log lines otherwise, and JSON lines in --metrics_out.
// Not thread-safe: the trainer thread owns it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/json_line.h"

namespace pstrain::worker {

// Appends JSON lines to a file, flushing each line. Thread-safe.
class MetricsFile {
 public:
  // An empty path makes a MetricsFile that writes nothing.
  static absl::StatusOr<std::unique_ptr<MetricsFile>> Open(const std::string& path);
  ~MetricsFile();
  void Write(const JsonLine& line);
  // A MetricsFile that wrote nowhere starts appending to `path` (a worker
  // that took the lead over); one that writes already keeps its file.
  absl::Status Attach(const std::string& path);

 private:
  explicit MetricsFile(std::FILE* f) : file_(f) {}
  std::FILE* file_;
};

struct ProgressSnapshot {
  int64_t step = 0;
  int64_t samples = 0;           // trained by this worker so far
  double fraction_done = 0;      // 0..1, for the ETA (NaN if unknown)
  double interval_loss = 0;      // mean loss since the last report
  double compute_seconds = 0;    // totals so far
  double wait_seconds = 0;
  double data_seconds = 0;       // waiting for the reader (a stream: for data to arrive)
  int epoch = 0;                 // 0-based epoch of the last batch
  int epochs = 0;                // of the run (0: unknown, e.g. a stream)
  int workers = 1;               // the job's rate is estimated as this worker's x workers
  double eval_auc = NAN;         // the latest evaluation (NaN: none yet)
  int64_t eval_step = -1;
};

class Progress {
 public:
  Progress(MetricsFile* metrics, absl::Duration log_every, bool terminal);
  // Reports when the log interval has passed (or `force`); true when it
  // wrote a log line (the interval restarts).
  bool Update(const ProgressSnapshot& s, bool force = false);
  void Finish();

  absl::Time start() const { return start_; }

 private:
  MetricsFile* metrics_;
  absl::Duration log_every_;
  bool terminal_;
  absl::Time start_;
  absl::Time last_report_;
  absl::Time last_bar_;
  int64_t last_samples_ = 0;
  double last_data_seconds_ = 0;
  bool drew_bar_ = false;
};

}  // namespace pstrain::worker
