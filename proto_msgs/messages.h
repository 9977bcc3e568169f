// Message bodies: the type-specific part of the header frame, encoded right
// after the Header with the same archive. Plain structs, no behaviour.
// Raw tensors (ids, values, gradients) never appear here: they travel as
// payload frames described by Header::payloads.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/table_spec.h"
#include "proto_msgs/bounded_archive.h"
#include "proto_msgs/header.h"

namespace pstrain::proto {

struct NodeInfo {
  Role role = Role::kUnknown;
  int32_t rank = -1;
  std::string endpoint;  // where its receive socket can be reached
  std::string host;
  int32_t pid = 0;
  uint64_t incarnation = 0;  // random per process start
  // Version 2. A stable identity (a worker's --node_id, e.g. its container's
  // hostname): the coordinator gives the same identity the same rank again.
  std::string node_id;
  // Registering again with the rank it had, its state kept: the coordinator
  // it talked to was lost and this may be a restarted one.
  bool resume = false;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(role, rank, endpoint, host, pid, incarnation);
    if (version >= 2) ar(node_id, resume);
  }
};

// kRegister. requested_rank -1 lets the coordinator choose.
struct RegisterRequest {
  NodeInfo node;
  int32_t requested_rank = -1;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(node, requested_rank);
  }
};

// Reply to kRegister and kGetCluster: who is in the job.
struct ClusterView {
  int32_t your_rank = -1;
  int32_t num_servers = 0;
  int32_t num_workers = 0;
  uint64_t epoch = 0;
  int64_t heartbeat_interval_ms = 1000;
  std::vector<NodeInfo> servers;  // by rank; empty until everyone joined
  std::vector<NodeInfo> workers;  // by rank
  // Version 2: the coordinator journals the job (--checkpoint_dir), so a
  // restarted one can take it back.
  bool journaled = false;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(your_rank, num_servers, num_workers, epoch, heartbeat_interval_ms, servers, workers);
    if (version >= 2) ar(journaled);
  }
};

// One contiguous piece of a dense table held by one server.
struct DenseRange {
  uint32_t table = 0;
  int32_t server = 0;
  uint64_t begin = 0;
  uint64_t length = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(table, server, begin, length);
  }
};

enum class Consistency : uint8_t { kAsp = 0, kBsp = 1, kSsp = 2 };

// Where a worker stands in its data and its clock at a checkpoint.
struct WorkerPosition {
  int32_t rank = -1;
  int64_t clock = 0;        // steps (pushes) done
  int32_t epoch = 0;        // data epoch it is in
  int64_t rows = 0;         // rows of that epoch already trained on
  bool finished = false;    // it had finished training
  std::string state_file;   // allreduce mode: worker-held dense state (rank 0)
  std::string state_checksum;
  int64_t samples = 0;      // samples it had trained in all, up to this position
  // Version 3: what its data shard was read from (data/file_set.h's
  // DescribeInputs): `rows` count rows of that input, so a resume checks it
  // reads the same. Empty: unknown (a stream, an older worker).
  std::string inputs;
  // Version 4: where in its shard the next row is (data/batch.h's
  // SourcePosition: range, Parquet row group and row, or a text file's
  // line offset; the file for messages), when its reader knew (-1: it did
  // not): a resume starts reading there.
  int32_t source_range = -1;
  int32_t source_row_group = -1;
  int64_t source_row = 0;
  int64_t source_offset = -1;
  std::string source_file;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(rank, clock, epoch, rows, finished, state_file, state_checksum);
    if (version >= 2) ar(samples);
    if (version >= 3) ar(inputs);
    if (version >= 4) ar(source_range, source_row_group, source_row, source_offset, source_file);
  }
};

// The job's parameter layout: tables and which server holds what. Sparse
// rows belong to server Mix64(id) % num_servers.
struct TableLayout {
  std::vector<TableSpec> tables;
  std::vector<DenseRange> dense_ranges;
  int32_t num_servers = 0;
  int32_t num_workers = 0;
  Consistency consistency = Consistency::kAsp;
  int32_t staleness = 0;
  // Version 2: checkpoints.
  int64_t checkpoint_step = -1;      // first step at which workers pause for one
  int64_t restored_step = -1;        // the job resumes from a checkpoint at this step
  std::vector<WorkerPosition> positions;  // by rank, when restored
  // Version 3: bumped by every recovery from a server failure; servers
  // refuse pulls and pushes of another epoch (sent before the rollback).
  uint64_t epoch = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(tables, dense_ranges, num_servers, num_workers, consistency, staleness);
    if (version >= 2) ar(checkpoint_step, restored_step, positions);
    if (version >= 3) ar(epoch);
  }
};

// kCreateTables (coordinator -> server): the layout, and which server rank
// the recipient is (its registration reply may still be on its way).
struct CreateTablesRequest {
  int32_t server_rank = -1;
  TableLayout layout;
  // Version 2: restore these checkpoint shard files (every server's) and
  // start the workers' clocks from layout.positions.
  std::vector<std::string> restore_files;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(server_rank, layout);
    if (version >= 2) ar(restore_files);
  }
};

// kCheckpointArrive (worker -> coordinator): this worker paused at
// position.clock for checkpoint `step` (or finished training). The reply
// (a CheckpointDone) comes when the checkpoint is written.
struct CheckpointArrive {
  int64_t step = -1;
  WorkerPosition position;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(step, position);
  }
};

struct CheckpointDone {
  std::string path;             // the checkpoint folder
  int64_t next_step = -1;       // where to pause next (-1: none scheduled)

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(path, next_step);
  }
};

// kSaveShard (coordinator -> server): write this server's shard of
// checkpoint `step` into `dir`. Reply: a ShardSaved.
struct SaveShardRequest {
  std::string dir;
  int64_t step = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(dir, step);
  }
};

struct ShardSaved {
  std::string file;  // name inside the checkpoint folder
  uint64_t bytes = 0;
  std::string checksum;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(file, bytes, checksum);
  }
};

// kRecover (coordinator -> servers and workers): a server failed and the
// cluster rolls back to the latest checkpoint. Servers drop their tables
// and fail waiting requests; workers stop talking to servers until the
// recovery of `epoch` completes (kWaitRecovery).
struct RecoverNotice {
  uint64_t epoch = 0;
  std::string reason;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(epoch, reason);
  }
};

// kWaitRecovery (worker -> coordinator): this worker, at `epoch`, hit an
// error; wait up to wait_ms for a recovery to begin. Reply: a Recovered once
// the cluster runs at a newer epoch, or Unavailable when none is under way.
struct WaitRecoveryRequest {
  uint64_t epoch = 0;
  int64_t wait_ms = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(epoch, wait_ms);
  }
};

struct Recovered {
  uint64_t epoch = 0;
  ClusterView view;    // with the replacement servers' endpoints
  TableLayout layout;  // restored_step and positions: where to resume

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(epoch, view, layout);
  }
};

// kRetireWorker (coordinator -> servers): worker `rank` died; BSP steps and
// SSP bounds stop waiting for it (elastic workers).
struct RetireWorker {
  int32_t rank = -1;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(rank);
  }
};

// Reply to kClaimShard: the data shard of dead worker `rank` from its last
// reported position (data epoch, rows of that epoch trained), or rank -1
// when no shard is left to adopt.
struct ShardClaim {
  int32_t rank = -1;
  int32_t epoch = 0;
  int64_t rows = 0;
  uint64_t samples = 0;  // what the dead worker had trained in all

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(rank, epoch, rows, samples);
  }
};

// kReadmitWorker (coordinator -> servers): dropped worker `rank` is back.
// kPrepare: from the next BSP step on, complete no step until the commit;
// the reply (a ReadmitWorker) proposes in `step` the first step this server
// can take the worker at. kCommit: the worker takes part from `step` on
// (the largest proposal, so no server has passed it); step -1 cancels the
// re-admission and the worker stays retired.
enum class ReadmitPhase : uint8_t { kPrepare = 0, kCommit = 1 };
struct ReadmitWorker {
  int32_t rank = -1;
  ReadmitPhase phase = ReadmitPhase::kPrepare;
  int64_t step = -1;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(rank, phase, step);
  }
};

// Reply to kRejoin (worker -> coordinator, after its tables are defined):
// whether this worker is a returning one and what it does.
enum class RejoinState : uint8_t {
  kNew = 0,      // not a returning worker: start as usual
  kResume = 1,   // re-admitted: train from clock `step`, its shard from `position`
  kAdopted = 2,  // its shard went to worker `adopter`: nothing left to train here
};
struct Rejoin {
  RejoinState state = RejoinState::kNew;
  int64_t step = -1;
  WorkerPosition position;  // clock = step; data epoch and rows to skip
  uint64_t samples = 0;     // what the rank had trained before it was dropped
  int32_t adopter = -1;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(state, step, position, samples, adopter);
  }
};

// Reply to kHeartbeat: what the coordinator wants the node to know.
struct HeartbeatReply {
  int64_t checkpoint_step = -1;  // workers: pause at this step for a checkpoint

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(checkpoint_step);
  }
};

// kDefineTables (worker -> coordinator): the model's tables.
struct DefineTablesRequest {
  std::vector<TableSpec> tables;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(tables);
  }
};

// One head's latest evaluation (a model of several heads), in a heartbeat:
// AUC (NaN for a regression head) and log loss (a regression head's mean
// squared error).
struct HeadScore {
  std::string head;
  double auc = NAN;
  double logloss = NAN;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(head, auc, logloss);
  }
};

// kHeartbeat. Besides liveness it carries what the coordinator's dashboard
// shows. Version 2 added everything after samples_per_sec; a version-1
// heartbeat decodes with those fields at their defaults. NaN: not known.
struct Heartbeat {
  int64_t step = 0;
  double samples_per_sec = 0;
  // Version 2.
  uint64_t samples = 0;          // worker: samples trained so far
  double loss = NAN;             // worker: mean training loss since the last heartbeat
  double eval_auc = NAN;         // worker 0: the latest evaluation, at eval_step
  double eval_logloss = NAN;
  int64_t eval_step = -1;
  double reader_rows_per_sec = 0;  // worker: data reader throughput (busy time)
  uint64_t rss_bytes = 0;        // resident memory of the process
  double cpu_seconds = 0;        // CPU time of the process so far
  uint64_t table_rows = 0;       // server: sparse rows + dense floats held
  uint64_t table_bytes = 0;      // server: memory of its table shards
  uint64_t requests = 0;         // server: pulls + pushes answered so far
  uint64_t bytes_in = 0;         // server: pull/push payload bytes received
  uint64_t bytes_out = 0;        // server: pull payload bytes sent

  // Version 3 (workers): the data position whose gradients are all on the
  // servers: the data epoch and the rows of it trained. A dead worker's
  // shard is adopted from here.
  int32_t data_epoch = 0;
  int64_t data_rows = 0;
  // Version 4 (workers, --train_stream): stream partitions passed and the
  // progressive AUC of this worker's share of the latest one.
  int32_t partitions = 0;
  double partition_auc = NAN;
  // Version 5 (worker 0, a model of several heads): each head's evaluation
  // at eval_step, in the model's order.
  std::vector<HeadScore> eval_heads;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(step, samples_per_sec);
    if (version >= 2) {
      ar(samples, loss, eval_auc, eval_logloss, eval_step, reader_rows_per_sec, rss_bytes,
         cpu_seconds, table_rows, table_bytes, requests, bytes_in, bytes_out);
    }
    if (version >= 3) ar(data_epoch, data_rows);
    if (version >= 4) ar(partitions, partition_auc);
    if (version >= 5) ar(eval_heads);
  }
};

// kBarrier: returns once `participants` nodes have entered `name`.
struct BarrierRequest {
  std::string name;
  int32_t participants = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(name, participants);
  }
};

// kStoreSet: value is payload 0 (bytes). kStoreGet: replies with one bytes
// payload per key, waiting up to wait_ms for missing keys (0 = no wait).
struct StoreRequest {
  std::vector<std::string> keys;
  int64_t wait_ms = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(keys, wait_ms);
  }
};

// One table's part of a pull or push.
//   pull dense:  values [begin, begin + count)   -> reply: f32[count]
//   pull sparse: payload u64[count] ids          -> reply: f32[count * dim]
//   push dense:  payload f32[count] at begin
//   push sparse: payloads u64[count] ids, f32[count * dim] gradients
struct KvPart {
  uint32_t table = 0;
  uint64_t begin = 0;
  uint64_t count = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(table, begin, count);
  }
};

// kPull / kPush. Header::step carries the worker's clock.
struct KvRequest {
  std::vector<KvPart> parts;
  // Push: number of samples the gradients were summed over.
  uint32_t num_samples = 0;
  // Push: the worker has finished training; synchronous steps stop waiting
  // for it (after this push is counted).
  bool retire = false;
  // Push: one piece of a worker's push for this step that more pieces
  // follow (a large dense gradient travels in pieces so that the server
  // applies one while the next arrives). A partial push carries dense parts
  // only and does not move the worker's clock; the step's last piece (not
  // partial) does, and carries the sparse parts and `retire`.
  bool partial = false;
  // Pull: the values (rows and dense ranges) come back as IEEE half floats
  // (DType::kF16) instead of floats: half the bytes. The server keeps and
  // updates its float values.
  bool values_f16 = false;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(parts, num_samples, retire, partial, values_f16);
  }
};

// kDumpRows: rows [offset, offset + max_rows) of this server's part of a
// sparse table, in the server's iteration order (stable while the table is
// not written). Reply: payloads u64 ids, f32 values (ids x dim); Header::step
// = the rows this server holds.
//
// Exports by version (--export_dir; version 2): `seq` > 0 names the
// export. kAll with seq also cuts the table's change log (a base:
// server/ps/tables/change_log.h). kChanged at offset 0 cuts it for a delta
// since export `since`, then pages through the cut's entries: the changed
// rows (ascending id) followed by the removed ids; the reply adds payload
// 2, u64 removed ids, and Header::step = the entries (changed + removed).
// FailedPrecondition when the server cannot give the changes since `since`
// (a base is needed).
enum class DumpMode : uint8_t { kAll = 0, kChanged = 1 };

struct DumpRequest {
  uint32_t table = 0;
  uint64_t offset = 0;
  uint64_t max_rows = 0;
  DumpMode mode = DumpMode::kAll;
  uint64_t seq = 0;
  uint64_t since = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(table, offset, max_rows);
    if (version >= 2) ar(mode, seq, since);
  }
};

// Pipeline mode: what travels between neighbouring stages of one pipeline
// replica. A kPipeActivation carries one micro-batch's activations (payload
// 0: f32[rows * cols]) and its labels (payload 1: f32[rows]) to the next
// stage; a kPipeGradient carries the gradient of those activations (payload
// 0: f32[rows * cols]) back. Marker phases carry no payloads. kPipeAbort
// carries only `reason`.
enum class PipePhase : uint8_t {
  kTrain = 0,     // a training micro-batch of step `step`
  kEval = 1,      // a forward-only micro-batch of evaluation round `step`
  kEvalEnd = 2,   // the end of evaluation round `step`
  kTrainEnd = 3,  // training is over (the stages retire and meet at a barrier)
  kEnd = 4,       // the stage loop ends
  kLastPhase = kEnd,
};

// One stage's timings of one training step, sent upstream with the step's
// last gradient so that stage 0 sees every stage (pipeline statistics).
struct PipeStageReport {
  int32_t stage = 0;
  std::vector<float> forward_seconds;   // CPU seconds of each micro-batch's forward
  std::vector<float> backward_seconds;  // ... and backward
  double busy_seconds = 0;   // totals since training began: compute (wall)
  double wait_seconds = 0;   // waiting for a neighbour (wall)
  double span_seconds = 0;   // inside the steps' schedules (wall)
  uint64_t bytes_sent = 0;   // activation + gradient payload bytes sent
  int32_t max_live = 0;      // most micro-batches of activations held at once

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(forward_seconds, backward_seconds, busy_seconds, wait_seconds, span_seconds, bytes_sent,
       max_live, stage);
  }
};

// The body of kPipeActivation / kPipeGradient / kPipeAbort. The tag
// (replica, step, microbatch) and the shape are checked on arrival.
struct PipeTransfer {
  int32_t replica = 0;
  int32_t from_stage = 0;
  uint64_t seq = 0;               // per link and direction, from 0: delivery order
  PipePhase phase = PipePhase::kTrain;
  int64_t step = 0;               // training step, or evaluation round
  int32_t microbatch = 0;
  int32_t num_microbatches = 0;   // of this step (or evaluation batch)
  int64_t step_rows = 0;          // rows of the whole batch
  int32_t rows = 0;               // of this micro-batch
  int32_t cols = 0;               // activation width
  double loss_sum = 0;            // gradient of a step's last micro-batch: the step's loss
  std::vector<PipeStageReport> reports;  // ditto: the downstream stages' timings
  std::string reason;             // kPipeAbort

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(replica, from_stage, seq, phase, step, microbatch, num_microbatches, step_rows, rows, cols,
       loss_sum, reports, reason);
  }
};

}  // namespace pstrain::proto

CEREAL_CLASS_VERSION(pstrain::proto::DumpRequest, 2);
CEREAL_CLASS_VERSION(pstrain::proto::NodeInfo, 2);
CEREAL_CLASS_VERSION(pstrain::proto::RegisterRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::ClusterView, 2);
CEREAL_CLASS_VERSION(pstrain::proto::DenseRange, 1);
CEREAL_CLASS_VERSION(pstrain::proto::TableLayout, 3);
CEREAL_CLASS_VERSION(pstrain::proto::WorkerPosition, 4);
CEREAL_CLASS_VERSION(pstrain::proto::CheckpointArrive, 1);
CEREAL_CLASS_VERSION(pstrain::proto::CheckpointDone, 1);
CEREAL_CLASS_VERSION(pstrain::proto::SaveShardRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::ShardSaved, 1);
CEREAL_CLASS_VERSION(pstrain::proto::HeartbeatReply, 1);
CEREAL_CLASS_VERSION(pstrain::proto::RecoverNotice, 1);
CEREAL_CLASS_VERSION(pstrain::proto::WaitRecoveryRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::Recovered, 1);
CEREAL_CLASS_VERSION(pstrain::proto::RetireWorker, 1);
CEREAL_CLASS_VERSION(pstrain::proto::ShardClaim, 1);
CEREAL_CLASS_VERSION(pstrain::proto::ReadmitWorker, 1);
CEREAL_CLASS_VERSION(pstrain::proto::Rejoin, 1);
CEREAL_CLASS_VERSION(pstrain::proto::CreateTablesRequest, 2);
CEREAL_CLASS_VERSION(pstrain::proto::DefineTablesRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::Heartbeat, 5);
CEREAL_CLASS_VERSION(pstrain::proto::HeadScore, 1);
CEREAL_CLASS_VERSION(pstrain::proto::BarrierRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::StoreRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::KvPart, 1);
CEREAL_CLASS_VERSION(pstrain::proto::KvRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::PipeStageReport, 1);
CEREAL_CLASS_VERSION(pstrain::proto::PipeTransfer, 1);
