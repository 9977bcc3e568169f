// ClusterMonitor: what the coordinator knows about the job, kept for the
// dashboard and the coordinator's /metrics: membership and health of every
// node, the numbers each one sends with its heartbeats, their history
// (training loss, throughput, memory, evaluations) and the checkpoint
// history.
//
// The coordinator's I/O thread feeds it (OnJoin, OnHeartbeat, ...); HTTP
// threads read it (StateJson, scrapes). Thread-safe: one mutex, held for
// short copies; a heartbeat costs a few vector appends.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/metrics/registry.h"
#include "proto_msgs/messages.h"

namespace pstrain::server {

// One checkpoint, as the dashboard lists it.
struct CheckpointRecord {
  int64_t step = 0;
  absl::Time time = absl::Now();  // when it completed (or failed)
  double duration_seconds = 0;    // from the request to the manifest
  uint64_t bytes = 0;             // all shards together
  std::string path;               // manifest or folder
  bool ok = true;
  std::string message;            // why it failed
};

struct ClusterMonitorOptions {
  int num_servers = 1;
  int num_workers = 1;
  std::string consistency = "asp";
  int staleness = 0;
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration heartbeat_timeout = absl::Seconds(10);
  std::string coordinator_endpoint;
  // Points kept per series. A full series drops every other point and from
  // then on keeps every other new one, so the whole run stays visible at
  // even spacing; the newest value is always shown.
  size_t max_points = 4000;
};

class ClusterMonitor {
 public:
  // Registers the coordinator's metrics in `registry` (may be null: no
  // metrics), which must outlive the monitor.
  ClusterMonitor(ClusterMonitorOptions options, metrics::Registry* registry);

  void OnJoin(const proto::NodeInfo& info);
  void OnHeartbeat(proto::Role role, int32_t rank, const proto::Heartbeat& hb);
  // The coordinator declared the node dead (no heartbeat in time) / heard
  // from it again.
  void OnDead(proto::Role role, int32_t rank);
  void OnAlive(proto::Role role, int32_t rank);
  void OnWorkerDone(int32_t rank);
  // What the node was last heard doing, for a log line that names a peer
  // others wait for: "at step 1200, 3400 samples/s, heard 0.4 s ago", "not
  // heard from for 12.0 s", "finished", "not joined yet".
  std::string Activity(proto::Role role, int32_t rank) const;
  // The job ends (OK: every worker finished).
  void OnJobEnd(const absl::Status& status);

  // Adds a checkpoint to the history and to the checkpoint metrics. For
  // the checkpoint orchestration; any thread.
  void AddCheckpoint(const CheckpointRecord& record);
  std::vector<CheckpointRecord> checkpoints() const;

  // The dashboard's data as JSON: job, nodes, series (at most
  // `max_points_per_series` each, evenly thinned) and checkpoints.
  std::string StateJson(size_t max_points_per_series = 600) const;

 private:
  struct Series {
    std::vector<float> t;  // seconds since the monitor started
    std::vector<float> v;
    uint64_t appended = 0;  // points offered so far
    uint64_t every = 1;     // keep one point in `every`
    bool has_tail = false;  // the newest point, when it was not kept
    float tail_t = 0, tail_v = 0;
  };
  struct Node {
    proto::NodeInfo info;
    bool joined = false;
    bool alive = false;
    bool done = false;
    absl::Time last_seen;
    int64_t heartbeats = 0;
    std::optional<proto::Heartbeat> last;
    // Rates from the two latest heartbeats.
    double cpu_percent = 0;
    double requests_per_sec = 0;
    absl::Time prev_time;
    Series loss, samples_per_sec, rss_mib, requests_per_sec_series;
    Series partition_auc;  // --train_stream: progressive AUC of its share, per partition
    int32_t partitions = 0;
  };
  // Parts of StateJson. REQUIRES: mu_ held.
  static nlohmann::json SeriesJson(const std::string& name, const Series& s, size_t max_points);
  static nlohmann::json NodeJson(const Node& n, absl::Time now);
  nlohmann::json CoordinatorJson() const;

  Node* FindNode(proto::Role role, int32_t rank) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(Series* s, double t, double v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RegisterMetrics(metrics::Registry* registry);
  void UpdateMetrics() ABSL_LOCKS_EXCLUDED(mu_);
  double Elapsed(absl::Time t) const { return absl::ToDoubleSeconds(t - started_); }

  const ClusterMonitorOptions options_;
  const absl::Time started_;

  mutable absl::Mutex mu_;
  std::vector<Node> servers_ ABSL_GUARDED_BY(mu_);
  std::vector<Node> workers_ ABSL_GUARDED_BY(mu_);
  Series eval_auc_ ABSL_GUARDED_BY(mu_);
  Series eval_logloss_ ABSL_GUARDED_BY(mu_);
  // A model of several heads: each head's evaluations (the first head's
  // are eval_auc_'s), in the model's order.
  struct HeadSeries {
    std::string head;
    Series auc, logloss;
  };
  std::vector<HeadSeries> head_evals_ ABSL_GUARDED_BY(mu_);
  int64_t last_eval_step_ ABSL_GUARDED_BY(mu_) = -1;
  std::vector<CheckpointRecord> checkpoints_ ABSL_GUARDED_BY(mu_);
  std::string job_state_ ABSL_GUARDED_BY(mu_) = "starting";
  std::string job_message_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> ended_ ABSL_GUARDED_BY(mu_);
  Series coordinator_rss_ ABSL_GUARDED_BY(mu_);
  absl::Time coordinator_sampled_ ABSL_GUARDED_BY(mu_);

  // Metrics (null without a registry).
  metrics::Family<metrics::Gauge>* heartbeat_age_ = nullptr;
  metrics::Family<metrics::Gauge>* node_up_ = nullptr;
  metrics::Family<metrics::Gauge>* nodes_ = nullptr;
  metrics::Counter* heartbeats_total_ = nullptr;
  metrics::Gauge* step_spread_ = nullptr;
  metrics::Gauge* cluster_samples_per_sec_ = nullptr;
  metrics::Gauge* cluster_loss_ = nullptr;
  metrics::Gauge* cluster_eval_auc_ = nullptr;
  metrics::Histogram* checkpoint_seconds_ = nullptr;
  metrics::Family<metrics::Counter>* checkpoints_total_ = nullptr;
  metrics::Gauge* checkpoint_step_ = nullptr;
  metrics::Gauge* checkpoint_time_ = nullptr;
  metrics::Gauge* checkpoint_bytes_ = nullptr;
};

}  // namespace pstrain::server
