// ServerMetrics: the parameter server's numbers for /metrics and for its
// heartbeats to the coordinator.
//
// Per-request updates (OnPullServed, OnPushApplied) are a few relaxed
// atomic adds on cells looked up when the tables were created, and one
// clock read at each end of a request. Table sizes and worker clocks are
// sampled by Sample() on the server's I/O thread (with each heartbeat), so
// a scrape never touches the tables.
//
// Thread-safety: the On*/Begin*/Sample methods are for the server's I/O
// thread; RecordCheckpointWrite and the registry may be used from any.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "common/metrics/process_metrics.h"
#include "common/metrics/registry.h"
#include "proto_msgs/messages.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {

class ServerMetrics {
 public:
  // Registers the server's families in `registry` (which must outlive
  // this object) and the process metrics.
  explicit ServerMetrics(metrics::Registry* registry);

  // Creates the cells of the tables this server holds (`held`: every sparse
  // table, the dense tables with a range here). I/O thread, once the tables
  // exist.
  // `tiered`: the sparse tables have a disk tier (--server_memory_budget).
  void OnTablesCreated(const proto::TableLayout& layout,
                       absl::FunctionRef<bool(uint32_t table)> held, bool tiered = false);

  // Marks the start of the request being handled (I/O thread).
  void BeginRequest() { request_start_ns_ = metrics::MonotonicNanos(); }
  // The start of the current request, kept by a pull that is parked, and
  // restored when the parked pull is served.
  int64_t request_start() const { return request_start_ns_; }
  void set_request_start(int64_t ns) { request_start_ns_ = ns; }

  // A pull answered / a push applied (or, under BSP, summed) with these
  // validated parts: counts keys and bytes per table and the latency since
  // BeginRequest().
  void OnPullServed(const std::vector<KvOp>& ops);
  void OnPushApplied(const std::vector<KvOp>& ops, bool applied_now);
  // A request answered with an error.
  void OnError() { errors_->Inc(); }
  // BSP: the summed step was applied to every table that received
  // gradients since the last call.
  void OnBspStepApplied();

  // Reads table sizes and worker clocks into gauges, and fills the
  // server's part of `hb` (rows, bytes, requests). I/O thread.
  void Sample(const std::vector<TableStats>* stats, const std::vector<int64_t>& pushed,
              const std::vector<bool>& retired, size_t parked, proto::Heartbeat* hb);

  // A checkpoint shard written (or failed) in `seconds`, `bytes` long.
  // Any thread.
  void RecordCheckpointWrite(double seconds, uint64_t bytes, bool ok);

  metrics::Registry* registry() const { return registry_; }

 private:
  struct TableCells {
    uint64_t value_bytes = 0;  // bytes of one key's values: dim floats (sparse) or 1 float
    bool sparse = false;
    metrics::Counter* pull_keys = nullptr;
    metrics::Counter* pull_bytes = nullptr;
    metrics::Counter* push_keys = nullptr;
    metrics::Counter* push_bytes = nullptr;
    metrics::Counter* updates = nullptr;
    metrics::Histogram* pull_seconds = nullptr;  // latency of the requests carrying the table
    metrics::Histogram* push_seconds = nullptr;
    metrics::Gauge* rows = nullptr;
    metrics::Gauge* memory = nullptr;
    // Sparse tables with admission only (else null).
    metrics::Gauge* sketch_bytes = nullptr;
    metrics::Counter* admitted = nullptr;
    metrics::Counter* refused_ids = nullptr;
    metrics::Counter* refused_pushes = nullptr;
    // Sparse tables with eviction only (else null).
    metrics::Counter* evicted_capacity = nullptr;
    metrics::Counter* evicted_ttl = nullptr;
    // Sparse tables with a disk tier only (else null).
    metrics::Gauge* ram_rows = nullptr;
    metrics::Gauge* disk_rows = nullptr;
    metrics::Gauge* disk_bytes = nullptr;
    metrics::Counter* tier_hits = nullptr;
    metrics::Counter* tier_misses = nullptr;
    metrics::Counter* tier_writes = nullptr;
    bool pending_bsp = false;  // BSP: gradients summed, not applied yet
  };
  // Counts the parts of one request and observes its latency (`seconds`)
  // for each table it carried.
  void CountOps(const std::vector<KvOp>& ops, bool pull, bool applied_now, double seconds);

  metrics::Registry* registry_;
  int64_t request_start_ns_ = 0;
  std::vector<TableCells> tables_;  // by table id
  absl::flat_hash_map<std::string, uint32_t> table_ids_;  // by name
  metrics::Histogram* pull_seconds_;
  metrics::Histogram* push_seconds_;
  metrics::Counter* requests_pull_;
  metrics::Counter* requests_push_;
  metrics::Counter* bsp_steps_;
  metrics::Counter* errors_;
  metrics::Gauge* parked_;
  metrics::Gauge* clock_lead_;
  metrics::Gauge* slowest_clock_;
  metrics::Gauge* fastest_clock_;
  metrics::Histogram* checkpoint_seconds_;
  metrics::Counter* checkpoint_ok_;
  metrics::Counter* checkpoint_failed_;
  metrics::Gauge* checkpoint_bytes_;
  metrics::Gauge* checkpoint_time_;
  // Totals for the heartbeat (I/O thread only).
  uint64_t requests_ = 0;
  uint64_t bytes_in_ = 0;
  uint64_t bytes_out_ = 0;
};

}  // namespace pstrain::server
