// CheckpointManager: the coordinator's view of checkpoints on disk.
//
// A checkpoint is a folder CKPT_DIR/ckpt-<step> holding one shard file per
// server (written by the servers), optionally the workers' own state, and a
// manifest.json written last by the coordinator. A folder without a manifest
// does not exist as far as restore is concerned. CKPT_DIR/LATEST names the
// newest complete checkpoint and is replaced atomically after its manifest.
// Old checkpoints beyond `keep` are deleted after a new one is complete.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/table_spec.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

struct CheckpointOptions {
  std::string dir;             // empty: no checkpoints
  int64_t every_steps = 0;     // 0: not by steps
  double every_secs = 0;       // 0: not by time
  int keep = 3;
  // auto: restore the latest if there is one; latest: it must exist; none;
  // or the path of a checkpoint folder.
  std::string restore = "auto";
};

struct ShardEntry {
  int rank = 0;
  std::string file;
  uint64_t bytes = 0;
  std::string checksum;
};

struct Manifest {
  std::string path;  // the checkpoint folder
  int64_t step = 0;
  std::string time;  // UTC, for people
  int num_servers = 0;
  int num_workers = 0;
  std::vector<TableSpec> tables;
  std::vector<ShardEntry> shards;
  std::vector<proto::WorkerPosition> workers;
};

// "ckpt-000000123"
std::string CheckpointName(int64_t step);

// Reads and checks CKPT/manifest.json (not the shard contents).
absl::StatusOr<Manifest> ReadManifest(const std::string& checkpoint_path);

class CheckpointManager {
 public:
  explicit CheckpointManager(CheckpointOptions options) : options_(std::move(options)) {}
  const CheckpointOptions& options() const { return options_; }
  bool enabled() const { return !options_.dir.empty(); }

  // The checkpoint to start from (per options.restore), or nullopt.
  absl::StatusOr<std::optional<Manifest>> FindRestore() const;
  // The checkpoint LATEST names in the checkpoint folder (recovery from a
  // failure), or none when there is none yet.
  absl::StatusOr<std::optional<Manifest>> FindLatest() const;

  // Creates the folder of checkpoint `step` and returns its path.
  absl::StatusOr<std::string> Prepare(int64_t step);
  // Writes the manifest, moves LATEST, prunes old checkpoints.
  absl::Status Commit(const Manifest& manifest);

 private:
  CheckpointOptions options_;
};

}  // namespace pstrain::server
