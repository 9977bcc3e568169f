// CoordinatorJournal: the coordinator's own state, kept durably next to the
// checkpoints (CKPT_DIR/coordinator.journal), so that a coordinator
// restarted by a restart policy takes a running job back without a rollback.
//
// The state (JobJournal) is small: the members and their ranks, the node
// identities mapped to ranks, the epoch, the tables and their layout, the
// rendezvous store, the checkpoint schedule, and how the job ended. The file
// is a log of records, each framed as
//
//   u32 magic "PSJ1" | u32 payload length | u64 Checksum64 of the payload | payload
//
// (little-endian; the payload is a Cereal portable binary JournalRecord).
// It starts with a snapshot of the whole state (written to a temp file,
// fsynced and renamed), and every change is appended and fdatasync'ed before
// the coordinator acts on it (a store key is acknowledged only once it is
// on disk). Past kCompactBytes the log is rewritten as one snapshot the same
// way. Reading replays it: a last record cut short (a crash while appending:
// it was never acknowledged) is ignored with a warning; any other damage
// (bad magic, a checksum mismatch, an undecodable record) is DataLoss naming
// the file and the offset.
//
// Owned by the Coordinator; not thread-safe (its I/O thread only).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

// A slot of the job: who holds a rank (role kUnknown: nobody yet).
struct JournalMember {
  proto::NodeInfo info;
  bool done = false;  // a worker that finished
  // Elastic workers: dropped from the job, its shard left to train from
  // this data position (the samples it had trained).
  bool dropped = false;
  int32_t data_epoch = 0;
  int64_t data_rows = 0;
  uint64_t samples = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(info, done, dropped, data_epoch, data_rows, samples);
  }
};

// A worker identity (--node_id) and the rank it was given.
struct JournalIdentity {
  std::string node_id;
  int32_t rank = -1;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(node_id, rank);
  }
};

struct JournalStoreEntry {
  std::string key;
  std::string value;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(key, value);
  }
};

// The checkpoint schedule and history (CheckpointCoordinator's part).
struct CheckpointJournal {
  int64_t checkpoint_step = -1;       // where workers pause next
  int64_t last_checkpoint_step = 0;   // the latest complete one
  std::string job_restore;            // the checkpoint the job began from ("": none)
  std::vector<TableSpec> tables;
  std::vector<proto::WorkerPosition> done_training;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(checkpoint_step, last_checkpoint_step, job_restore, tables, done_training);
  }
};

enum class JobState : int32_t { kRunning = 0, kFinished = 1, kFailed = 2 };

struct JobJournal {
  int32_t num_servers = 0;
  int32_t num_workers = 0;
  std::string started;  // UTC, when the job's first coordinator started
  uint64_t epoch = 0;
  std::vector<JournalMember> servers;  // by rank
  std::vector<JournalMember> workers;  // by rank
  std::vector<JournalIdentity> identities;
  std::vector<TableSpec> tables;       // empty: not defined yet
  bool has_layout = false;
  proto::TableLayout layout;
  std::vector<JournalStoreEntry> store;
  CheckpointJournal checkpoints;
  JobState state = JobState::kRunning;
  int64_t final_step = 0;   // kFinished: the step training ended at
  std::string end_message;  // kFailed: why
  std::string ended;        // UTC

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(num_servers, num_workers, started, epoch, servers, workers, identities, tables, has_layout,
       layout, store, checkpoints, state, final_step, end_message, ended);
  }
};

class CoordinatorJournal {
 public:
  // Past this the log is compacted into one snapshot.
  static constexpr uint64_t kCompactBytes = 16 << 20;

  // CKPT_DIR/coordinator.journal
  static std::string PathIn(const std::string& checkpoint_dir);
  // The state the journal at `path` holds; nullopt when there is no file.
  // DataLoss naming the file when it is damaged.
  static absl::StatusOr<std::optional<JobJournal>> Load(const std::string& path);
  // A journal at `path` that starts as `state` (replacing any file there).
  static absl::StatusOr<std::unique_ptr<CoordinatorJournal>> Create(const std::string& path,
                                                                    JobJournal state);
  ~CoordinatorJournal();
  CoordinatorJournal(const CoordinatorJournal&) = delete;
  CoordinatorJournal& operator=(const CoordinatorJournal&) = delete;

  // Each change is on disk when it returns OK.
  absl::Status SetMember(proto::Role role, const JournalMember& member);
  absl::Status SetIdentity(const std::string& node_id, int32_t rank);
  absl::Status SetEpoch(uint64_t epoch);
  absl::Status SetTables(const std::vector<TableSpec>& tables, const proto::TableLayout* layout);
  absl::Status SetStore(const std::string& key, const std::string& value);
  absl::Status EraseStore(const std::string& key);
  absl::Status SetCheckpoints(const CheckpointJournal& checkpoints);
  absl::Status End(JobState state, int64_t final_step, const std::string& message);

  const JobJournal& state() const { return state_; }
  const std::string& path() const { return path_; }

  // One change (or the whole state), as framed in the file (the .cc file's).
  struct Record;

 private:
  CoordinatorJournal(std::string path, JobJournal state) : path_(std::move(path)), state_(std::move(state)) {}
  // Writes the whole state as one snapshot (temp file, fsync, rename) and
  // reopens it for appending.
  absl::Status WriteSnapshot();
  absl::Status Append(const Record& record);
  static std::string Frame(const Record& record);

  const std::string path_;
  JobJournal state_;
  int fd_ = -1;
  uint64_t bytes_ = 0;
};

}  // namespace pstrain::server

CEREAL_CLASS_VERSION(pstrain::server::JournalMember, 1);
CEREAL_CLASS_VERSION(pstrain::server::JournalIdentity, 1);
CEREAL_CLASS_VERSION(pstrain::server::JournalStoreEntry, 1);
CEREAL_CLASS_VERSION(pstrain::server::CheckpointJournal, 1);
CEREAL_CLASS_VERSION(pstrain::server::JobJournal, 1);
