// A stream of time-partitioned log folders (--train_stream=DIR), the
// Hadoop/Hive convention: a partition is a folder under DIR (at any depth
// up to kMaxPartitionDepth, e.g. DIR/2026-12-01/13) that holds a `_SUCCESS`
// file; it is complete, and never changes again, once that marker exists.
// Its data files are the regular files directly in it whose names start
// with neither '_' nor '.' (plain, gzip or zstd, told by content as for
// --train_data). A partition is named by its path relative to DIR.
//
// Partitions are taken in name order, each once: the writer's contract is
// that partitions complete in name order (time order for date/hour names).
// One that completes after a later-named one was taken is behind the
// stream's position and is skipped, with a warning. Every worker lists the
// same folder and so takes the same partition as its k-th.
//
// Discovery polls (a listing every `poll`): inotify does not see into
// network file systems, where log partitions usually land, and a listing a
// second is cheap next to a partition's training.
//
// Not thread-safe; one reader thread uses it.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/file_set.h"

namespace pstrain::worker {

inline constexpr int kMaxPartitionDepth = 4;
inline constexpr char kSuccessMarker[] = "_SUCCESS";
// Partitions already there that a job looks at before it starts.
inline constexpr int kStreamPartitionsChecked = 3;

struct StreamOptions {
  std::string dir;    // empty: no stream
  std::string start;  // first partition taken: the first named >= start ("" : from the first)
  std::string end;    // last partition taken: the last named <= end ("": no end)
  absl::Duration poll = absl::Seconds(1);
  // The stream ends when no new partition completes for this long (zero:
  // it never does; the job runs until it is stopped or reaches `end`).
  absl::Duration idle_timeout = absl::ZeroDuration();
};

// "--train_stream: ..." when the options cannot work (a missing folder,
// start after end, a non-positive poll).
absl::Status ValidateStreamOptions(const StreamOptions& options);

// The complete partitions under `dir` in name order.
absl::StatusOr<std::vector<std::string>> ListCompletePartitions(const std::string& dir);

// The data files of partition `name` of `dir`, sorted (possibly none).
absl::StatusOr<std::vector<InputFile>> PartitionFiles(const std::string& dir,
                                                      const std::string& name);

// The non-empty data files of the first `max_partitions` complete
// partitions within the options' start and end: what a job checks before
// it starts (empty when none has landed yet).
absl::StatusOr<std::vector<std::string>> FirstPartitionFiles(const StreamOptions& options,
                                                             int max_partitions);

struct Partition {
  std::string name;
  std::vector<InputFile> files;
};

class PartitionStream {
 public:
  explicit PartitionStream(StreamOptions options) : options_(std::move(options)) {}

  // The next partition, waiting for it to complete; nullopt when the
  // stream has ended (past `end`, idle past idle_timeout, or `stop` set:
  // checked every poll). Errors: the listing's or a file's I/O error.
  absl::StatusOr<std::optional<Partition>> Next(const std::atomic<bool>& stop);

  // Skips the partitions before the `count`-th from the start without
  // reading them (a resumed worker's finished partitions). Those must be
  // complete already; FailedPrecondition when fewer are.
  absl::Status SkipPartitions(int count);

  const std::string& last_name() const { return last_; }

 private:
  // The first complete partition after the last one taken, or nullopt.
  absl::StatusOr<std::optional<std::string>> FindNext();

  StreamOptions options_;
  std::string last_;   // name of the last partition taken
  bool taken_any_ = false;
  bool ended_ = false;
  bool end_said_ = false;  // the end was logged
};

}  // namespace pstrain::worker
