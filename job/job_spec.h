// A job: the settings of one training job (cluster, tables, model, data,
// training, evaluation, checkpoints, exports) as a job file holds them,
// with where each value came from. Plain data: reading a file, overriding
// fields and writing the spec back are all it does; the processes apply it
// to their flags (job/job_flags.h).
//
//   {
//     // JSON with comments
//     "cluster": {"servers": 2, "workers": 2, "mode": "ps"},
//     "tables": [{"name": "*", "dim": 16, "optimizer": "adagrad", "lr": 0.05}],
//     "model": {"name": "dlrm", "bottom_mlp": [64, 16]},
//     "data": {"train": "train.tsv", "eval": "eval.tsv"},
//     "train": {"batch_size": 1024, "epochs": 1}
//   }
//
// Every key is a field of job/job_fields.h (one field, one flag). Not
// thread-safe; copy freely.
#pragma once

#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"
#include "job/job_fields.h"

namespace pstrain::job {

// Where a value came from, weakest first: a later source overrides.
enum class Source { kDefault, kCoordinator, kFile, kEnvironment, kFlag };
absl::string_view SourceName(Source s);

struct JobValue {
  const JobField* field = nullptr;
  std::string value;  // as the flag takes it: "64,16", "true", "0.05"
  Source source = Source::kDefault;
  std::string where;  // "job.json:12", "--batch_size", "PSTRAIN_BATCH_SIZE", a coordinator
};

class JobSpec {
 public:
  // Reads a job file. Errors name the file, the line and the key (with the
  // closest field when it looks like a typo).
  static absl::StatusOr<JobSpec> ReadFile(const std::string& path);
  // Parses a job's text; `name` is the file (or peer) it came from, for
  // messages and for the values' `where`; `source` what to record.
  static absl::StatusOr<JobSpec> Parse(absl::string_view text, const std::string& name,
                                       Source source = Source::kFile);

  // Sets a field: a flag or variable overriding the file, or a default.
  void Set(const JobField& field, std::string value, Source source, std::string where);
  // The value of the field of `flag`, or null when the spec does not set it.
  const JobValue* Find(absl::string_view flag) const;
  // The values set, in the fields' order.
  const std::vector<JobValue>& values() const { return values_; }
  bool empty() const { return values_.empty(); }
  // The file it was read from ("" when built otherwise).
  const std::string& file() const { return file_; }
  // The job's "name" and "description" (may be empty).
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  void set_name(std::string name) { name_ = std::move(name); }
  void set_description(std::string text) { description_ = std::move(text); }

  // "--FLAG=VALUE" for each value whose field one of `roles` reads.
  std::vector<std::string> FlagArgs(uint8_t roles) const;
  // The spec as a job file (sections, the values set), which Parse reads
  // back to the same values.
  std::string ToJson() const;

 private:
  std::vector<JobValue> values_;  // sorted by field
  std::string file_;
  std::string name_;
  std::string description_;
};

}  // namespace pstrain::job
