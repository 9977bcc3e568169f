// Message bodies: the type-specific part of the header frame, encoded right
// after the Header with the same archive. Plain structs, no behaviour.
// Raw tensors (ids, values, gradients) never appear here: they travel as
// payload frames described by Header::payloads.
#pragma once

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

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(role, rank, endpoint, host, pid, incarnation);
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

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(your_rank, num_servers, num_workers, epoch, heartbeat_interval_ms, servers, workers);
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

// The job's parameter layout: tables and which server holds what. Sparse
// rows belong to server Mix64(id) % num_servers.
struct TableLayout {
  std::vector<TableSpec> tables;
  std::vector<DenseRange> dense_ranges;
  int32_t num_servers = 0;
  int32_t num_workers = 0;
  Consistency consistency = Consistency::kAsp;
  int32_t staleness = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(tables, dense_ranges, num_servers, num_workers, consistency, staleness);
  }
};

// kCreateTables (coordinator -> server): the layout, and which server rank
// the recipient is (its registration reply may still be on its way).
struct CreateTablesRequest {
  int32_t server_rank = -1;
  TableLayout layout;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(server_rank, layout);
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

// kHeartbeat.
struct Heartbeat {
  int64_t step = 0;
  double samples_per_sec = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(step, samples_per_sec);
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

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(parts, num_samples, retire);
  }
};

// kDumpRows: rows [offset, offset + max_rows) of this server's part of a
// sparse table, in the server's iteration order (stable while the table is
// not written). Reply: payloads u64 ids, f32 values (ids x dim); Header::step
// = the rows this server holds.
struct DumpRequest {
  uint32_t table = 0;
  uint64_t offset = 0;
  uint64_t max_rows = 0;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(table, offset, max_rows);
  }
};

}  // namespace pstrain::proto

CEREAL_CLASS_VERSION(pstrain::proto::DumpRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::NodeInfo, 1);
CEREAL_CLASS_VERSION(pstrain::proto::RegisterRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::ClusterView, 1);
CEREAL_CLASS_VERSION(pstrain::proto::DenseRange, 1);
CEREAL_CLASS_VERSION(pstrain::proto::TableLayout, 1);
CEREAL_CLASS_VERSION(pstrain::proto::CreateTablesRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::DefineTablesRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::Heartbeat, 1);
CEREAL_CLASS_VERSION(pstrain::proto::BarrierRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::StoreRequest, 1);
CEREAL_CLASS_VERSION(pstrain::proto::KvPart, 1);
CEREAL_CLASS_VERSION(pstrain::proto::KvRequest, 1);
