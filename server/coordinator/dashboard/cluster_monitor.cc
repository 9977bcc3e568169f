#include "server/coordinator/dashboard/cluster_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "cluster/node_info.h"
#include "common/metrics/process_metrics.h"

namespace pstrain::server {
namespace {

using nlohmann::json;

// The most heads' series kept (a heartbeat's list is a peer's word).
constexpr size_t kMaxHeadSeries = 32;

// A number for the JSON: NaN and infinities become null, others are
// rounded to `digits` significant digits (shorter text).
json Num(double v, int digits = 6) {
  if (!std::isfinite(v)) return nullptr;
  if (v == 0) return 0.0;
  double scale = std::pow(10.0, digits - 1 - static_cast<int>(std::floor(std::log10(std::fabs(v)))));
  return std::round(v * scale) / scale;
}

std::string RoleText(proto::Role r) { return proto::RoleName(r); }

}  // namespace

ClusterMonitor::ClusterMonitor(ClusterMonitorOptions options, metrics::Registry* registry)
    : options_(std::move(options)), started_(absl::Now()) {
  servers_.resize(std::max(0, options_.num_servers));
  workers_.resize(std::max(0, options_.num_workers));
  for (size_t i = 0; i < servers_.size(); ++i) {
    servers_[i].info.role = proto::Role::kServer;
    servers_[i].info.rank = static_cast<int32_t>(i);
  }
  for (size_t i = 0; i < workers_.size(); ++i) {
    workers_[i].info.role = proto::Role::kWorker;
    workers_[i].info.rank = static_cast<int32_t>(i);
  }
  if (registry != nullptr) RegisterMetrics(registry);
}

ClusterMonitor::Node* ClusterMonitor::FindNode(proto::Role role, int32_t rank) {
  auto& nodes = role == proto::Role::kServer ? servers_ : workers_;
  if (role != proto::Role::kServer && role != proto::Role::kWorker) return nullptr;
  if (rank < 0 || rank >= static_cast<int32_t>(nodes.size())) return nullptr;
  return &nodes[rank];
}

void ClusterMonitor::Append(Series* s, double t, double v) {
  if (!std::isfinite(v)) return;
  if (s->appended++ % s->every != 0) {
    s->has_tail = true;
    s->tail_t = static_cast<float>(t);
    s->tail_v = static_cast<float>(v);
    return;
  }
  if (s->t.size() >= std::max<size_t>(2, options_.max_points)) {
    // Keep the points at even positions (those at multiples of 2 * every).
    size_t keep = 0;
    for (size_t i = 0; i < s->t.size(); i += 2, ++keep) {
      s->t[keep] = s->t[i];
      s->v[keep] = s->v[i];
    }
    s->t.resize(keep);
    s->v.resize(keep);
    s->every *= 2;
    if ((s->appended - 1) % s->every != 0) {  // this point is now off the grid
      s->has_tail = true;
      s->tail_t = static_cast<float>(t);
      s->tail_v = static_cast<float>(v);
      return;
    }
  }
  s->has_tail = false;
  s->t.push_back(static_cast<float>(t));
  s->v.push_back(static_cast<float>(v));
}

void ClusterMonitor::OnJoin(const proto::NodeInfo& info) {
  absl::MutexLock lock(&mu_);
  Node* n = FindNode(info.role, info.rank);
  if (n == nullptr) return;
  n->info = info;
  n->joined = true;
  n->alive = true;
  n->last_seen = absl::Now();
  bool all = true;
  for (auto* nodes : {&servers_, &workers_}) {
    for (const Node& m : *nodes) all = all && m.joined;
  }
  if (all && job_state_ == "starting") job_state_ = "running";
}

void ClusterMonitor::OnHeartbeat(proto::Role role, int32_t rank, const proto::Heartbeat& hb) {
  absl::Time now = absl::Now();
  if (heartbeats_total_ != nullptr) heartbeats_total_->Inc();
  absl::MutexLock lock(&mu_);
  Node* n = FindNode(role, rank);
  if (n == nullptr) return;
  double t = Elapsed(now);
  if (n->last && n->prev_time < now) {
    double dt = absl::ToDoubleSeconds(now - n->prev_time);
    n->cpu_percent = std::max(0.0, 100 * (hb.cpu_seconds - n->last->cpu_seconds) / dt);
    if (hb.requests >= n->last->requests) {
      n->requests_per_sec = static_cast<double>(hb.requests - n->last->requests) / dt;
    }
  }
  n->last = hb;
  n->prev_time = now;
  n->last_seen = now;
  ++n->heartbeats;
  if (hb.rss_bytes > 0) Append(&n->rss_mib, t, static_cast<double>(hb.rss_bytes) / (1 << 20));
  if (role == proto::Role::kWorker) {
    Append(&n->loss, t, hb.loss);
    if (hb.samples > 0 || hb.samples_per_sec > 0) Append(&n->samples_per_sec, t, hb.samples_per_sec);
    if (hb.partitions > n->partitions) {
      n->partitions = hb.partitions;
      if (std::isfinite(hb.partition_auc)) Append(&n->partition_auc, t, hb.partition_auc);
    }
    if (hb.eval_step >= 0 && hb.eval_step != last_eval_step_ && std::isfinite(hb.eval_auc)) {
      last_eval_step_ = hb.eval_step;
      Append(&eval_auc_, t, hb.eval_auc);
      Append(&eval_logloss_, t, hb.eval_logloss);
      for (const proto::HeadScore& h : hb.eval_heads) {
        auto it = std::find_if(head_evals_.begin(), head_evals_.end(),
                               [&h](const HeadSeries& s) { return s.head == h.head; });
        if (it == head_evals_.end()) {
          if (head_evals_.size() >= kMaxHeadSeries) continue;  // a bound on a peer's list
          it = head_evals_.insert(head_evals_.end(), HeadSeries{h.head, {}, {}});
        }
        if (std::isfinite(h.auc)) {
          Append(&it->auc, t, h.auc);
          Append(&it->logloss, t, h.logloss);
        }
      }
    }
  } else if (n->heartbeats > 1) {
    Append(&n->requests_per_sec_series, t, n->requests_per_sec);
  }
  if (now - coordinator_sampled_ >= options_.heartbeat_interval) {
    coordinator_sampled_ = now;
    Append(&coordinator_rss_, t,
           static_cast<double>(metrics::ReadProcessUsage().resident_bytes) / (1 << 20));
  }
}

void ClusterMonitor::OnDead(proto::Role role, int32_t rank) {
  absl::MutexLock lock(&mu_);
  if (Node* n = FindNode(role, rank)) n->alive = false;
}

void ClusterMonitor::OnAlive(proto::Role role, int32_t rank) {
  absl::MutexLock lock(&mu_);
  if (Node* n = FindNode(role, rank)) n->alive = true;
}

void ClusterMonitor::OnWorkerDone(int32_t rank) {
  absl::MutexLock lock(&mu_);
  if (Node* n = FindNode(proto::Role::kWorker, rank)) n->done = true;
}

std::string ClusterMonitor::Activity(proto::Role role, int32_t rank) const {
  absl::MutexLock lock(&mu_);
  const Node* n = const_cast<ClusterMonitor*>(this)->FindNode(role, rank);
  if (n == nullptr || !n->joined) return "not joined yet";
  if (n->done) return "finished";
  const double ago = absl::ToDoubleSeconds(absl::Now() - n->last_seen);
  if (!n->alive) return absl::StrFormat("not heard from for %.1f s", ago);
  if (!n->last || role != proto::Role::kWorker) return absl::StrFormat("heard %.1f s ago", ago);
  return absl::StrFormat("at step %d, %.0f samples/s, heard %.1f s ago", n->last->step,
                         n->last->samples_per_sec, ago);
}

void ClusterMonitor::OnJobEnd(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  if (ended_) return;
  ended_ = absl::Now();
  job_state_ = status.ok() ? "finished" : (absl::IsCancelled(status) ? "stopped" : "failed");
  job_message_ = status.ok() ? "" : status.ToString();
}

void ClusterMonitor::AddCheckpoint(const CheckpointRecord& record) {
  {
    absl::MutexLock lock(&mu_);
    checkpoints_.push_back(record);
    // The history the page lists: the latest ones.
    constexpr size_t kMaxCheckpoints = 100;
    if (checkpoints_.size() > kMaxCheckpoints) {
      checkpoints_.erase(checkpoints_.begin(), checkpoints_.end() - kMaxCheckpoints);
    }
  }
  if (checkpoints_total_ == nullptr) return;
  checkpoints_total_->Get({record.ok ? "ok" : "failed"})->Inc();
  if (!record.ok) return;
  checkpoint_seconds_->Observe(record.duration_seconds);
  checkpoint_step_->Set(static_cast<double>(record.step));
  checkpoint_time_->Set(absl::ToDoubleSeconds(record.time - absl::UnixEpoch()));
  checkpoint_bytes_->Set(static_cast<double>(record.bytes));
}

std::vector<CheckpointRecord> ClusterMonitor::checkpoints() const {
  absl::MutexLock lock(&mu_);
  return checkpoints_;
}

json ClusterMonitor::SeriesJson(const std::string& name, const Series& s, size_t max_points) {
  json j;
  j["name"] = name;
  json t = json::array(), v = json::array();
  size_t n = s.t.size() + (s.has_tail ? 1 : 0);
  auto at = [&s](size_t i, bool time) {
    if (i == s.t.size()) return time ? s.tail_t : s.tail_v;
    return time ? s.t[i] : s.v[i];
  };
  size_t stride = n > max_points && max_points > 0 ? (n + max_points - 1) / max_points : 1;
  // Evenly spaced from the first point; the newest one always included.
  for (size_t i = 0; i < n; i += stride) {
    t.push_back(Num(at(i, true), 7));
    v.push_back(Num(at(i, false), 5));
  }
  if (n > 0 && (n - 1) % stride != 0) {
    t.push_back(Num(at(n - 1, true), 7));
    v.push_back(Num(at(n - 1, false), 5));
  }
  j["t"] = std::move(t);
  j["v"] = std::move(v);
  return j;
}

json ClusterMonitor::CoordinatorJson() const {
  json c;
  metrics::ProcessUsage u = metrics::ReadProcessUsage();
  c["role"] = "coordinator";
  c["rank"] = 0;
  c["endpoint"] = options_.coordinator_endpoint;
  c["host"] = LocalHostName();
  c["pid"] = static_cast<int>(getpid());
  c["state"] = "alive";
  c["heartbeat_age"] = 0.0;
  c["rss_bytes"] = u.resident_bytes;
  c["cpu_seconds"] = Num(u.cpu_seconds);
  return c;
}

json ClusterMonitor::NodeJson(const Node& n, absl::Time now) {
  json j;
  j["role"] = RoleText(n.info.role);
  j["rank"] = n.info.rank;
  j["endpoint"] = n.info.endpoint;
  j["host"] = n.info.host;
  j["pid"] = n.info.pid;
  j["state"] = !n.joined ? "waiting" : n.done ? "done" : n.alive ? "alive" : "dead";
  j["heartbeat_age"] = n.joined ? Num(absl::ToDoubleSeconds(now - n.last_seen), 4) : json(nullptr);
  j["heartbeats"] = n.heartbeats;
  if (!n.last) return j;
  const proto::Heartbeat& hb = *n.last;
  j["step"] = hb.step;
  j["rss_bytes"] = hb.rss_bytes;
  j["cpu_seconds"] = Num(hb.cpu_seconds);
  j["cpu_percent"] = Num(n.cpu_percent, 3);
  if (n.info.role == proto::Role::kWorker) {
    j["samples"] = hb.samples;
    j["samples_per_sec"] = Num(hb.samples_per_sec);
    j["loss"] = Num(hb.loss);
    j["reader_rows_per_sec"] = Num(hb.reader_rows_per_sec);
    j["eval_auc"] = Num(hb.eval_auc);
    j["eval_logloss"] = Num(hb.eval_logloss);
  } else {
    j["table_rows"] = hb.table_rows;
    j["table_bytes"] = hb.table_bytes;
    j["requests"] = hb.requests;
    j["requests_per_sec"] = Num(n.requests_per_sec);
    j["bytes_in"] = hb.bytes_in;
    j["bytes_out"] = hb.bytes_out;
  }
  return j;
}

std::string ClusterMonitor::StateJson(size_t max_points) const {
  absl::Time now = absl::Now();
  json out;
  absl::MutexLock lock(&mu_);
  out["now"] = Num(Elapsed(now), 8);
  out["started_unix"] = Num(absl::ToDoubleSeconds(started_ - absl::UnixEpoch()), 13);
  json job;
  job["state"] = job_state_;
  job["message"] = job_message_;
  job["servers"] = options_.num_servers;
  job["workers"] = options_.num_workers;
  job["consistency"] = options_.consistency;
  job["staleness"] = options_.staleness;
  job["heartbeat_interval"] = absl::ToDoubleSeconds(options_.heartbeat_interval);
  job["heartbeat_timeout"] = absl::ToDoubleSeconds(options_.heartbeat_timeout);
  job["ended"] = ended_ ? Num(Elapsed(*ended_), 8) : json(nullptr);
  out["job"] = std::move(job);

  json nodes = json::array();
  json loss = json::array(), sps = json::array(), rss = json::array(), rps = json::array();
  // A model of several heads: a line per head (the first is the job's).
  json auc = json::array(), logloss = json::array();
  for (const HeadSeries& h : head_evals_) {
    if (h.auc.v.empty()) continue;  // a regression head: no AUC
    auc.push_back(SeriesJson(h.head + " AUC", h.auc, max_points));
    logloss.push_back(SeriesJson(h.head + " logloss", h.logloss, max_points));
  }
  if (auc.empty()) {
    auc.push_back(SeriesJson("eval AUC", eval_auc_, max_points));
    logloss.push_back(SeriesJson("eval logloss", eval_logloss_, max_points));
  }
  nodes.push_back(CoordinatorJson());
  rss.push_back(SeriesJson("coordinator", coordinator_rss_, max_points));
  for (const auto* group : {&servers_, &workers_}) {
    for (const Node& n : *group) {
      std::string name = RoleText(n.info.role) + " " + std::to_string(n.info.rank);
      nodes.push_back(NodeJson(n, now));
      if (!n.joined) continue;
      rss.push_back(SeriesJson(name, n.rss_mib, max_points));
      if (n.info.role == proto::Role::kWorker) {
        loss.push_back(SeriesJson(name, n.loss, max_points));
        if (!n.partition_auc.v.empty()) {
          auc.push_back(SeriesJson(name + " progressive AUC", n.partition_auc, max_points));
        }
        sps.push_back(SeriesJson(name, n.samples_per_sec, max_points));
      } else {
        rps.push_back(SeriesJson(name, n.requests_per_sec_series, max_points));
      }
    }
  }
  out["nodes"] = std::move(nodes);
  json series;
  series["loss"] = std::move(loss);
  series["samples_per_sec"] = std::move(sps);
  series["rss_mib"] = std::move(rss);
  series["requests_per_sec"] = std::move(rps);
  series["eval_auc"] = std::move(auc);
  series["eval_logloss"] = std::move(logloss);
  out["series"] = std::move(series);
  json cps = json::array();
  for (const CheckpointRecord& c : checkpoints_) {
    json j;
    j["step"] = c.step;
    j["time_unix"] = Num(absl::ToDoubleSeconds(c.time - absl::UnixEpoch()), 13);
    j["duration_seconds"] = Num(c.duration_seconds);
    j["bytes"] = c.bytes;
    j["path"] = c.path;
    j["ok"] = c.ok;
    j["message"] = c.message;
    cps.push_back(std::move(j));
  }
  out["checkpoints"] = std::move(cps);
  return out.dump();
}

// ---- metrics ---------------------------------------------------------------

void ClusterMonitor::RegisterMetrics(metrics::Registry* r) {
  metrics::RegisterProcessMetrics(r);
  heartbeat_age_ = r->AddGauge("pstrain_coordinator_heartbeat_age_seconds",
                               "Seconds since the node's last heartbeat (or registration).",
                               {"role", "rank"});
  node_up_ = r->AddGauge("pstrain_coordinator_node_up",
                         "1 while the node is alive (joined, not declared dead, not done).",
                         {"role", "rank"});
  nodes_ = r->AddGauge("pstrain_coordinator_nodes", "Nodes of the job by role and state.",
                       {"role", "state"});
  heartbeats_total_ = r->GetCounter("pstrain_coordinator_heartbeats_total", "Heartbeats received.");
  step_spread_ = r->GetGauge(
      "pstrain_coordinator_worker_step_spread",
      "Staleness seen by the coordinator: steps by which the fastest training worker leads the "
      "slowest (from heartbeats).");
  cluster_samples_per_sec_ = r->GetGauge("pstrain_cluster_samples_per_second",
                                         "Training throughput of all workers together.");
  cluster_loss_ = r->GetGauge("pstrain_cluster_train_loss",
                              "Mean training loss of the workers' latest heartbeats.");
  cluster_eval_auc_ = r->GetGauge("pstrain_cluster_eval_auc", "Latest evaluation AUC (worker 0).");
  checkpoint_seconds_ = r->AddHistogram("pstrain_checkpoint_duration_seconds",
                                        "Time from a checkpoint's start to its manifest.", {},
                                        metrics::LongDurationBuckets())
                            ->Get({});
  checkpoints_total_ = r->AddCounter("pstrain_checkpoints_total", "Checkpoints by outcome.", {"outcome"});
  checkpoints_total_->Get({"ok"});
  checkpoints_total_->Get({"failed"});
  checkpoint_step_ = r->GetGauge("pstrain_checkpoint_last_step", "Step of the latest checkpoint.");
  checkpoint_time_ = r->GetGauge("pstrain_checkpoint_last_timestamp_seconds",
                                 "When the latest checkpoint completed (unix time).");
  checkpoint_bytes_ = r->GetGauge("pstrain_checkpoint_last_bytes", "Size of the latest checkpoint.");
  // Cells for every expected node exist from the start.
  for (int s = 0; s < options_.num_servers; ++s) {
    heartbeat_age_->Get({"server", std::to_string(s)});
    node_up_->Get({"server", std::to_string(s)});
  }
  for (int w = 0; w < options_.num_workers; ++w) {
    heartbeat_age_->Get({"worker", std::to_string(w)});
    node_up_->Get({"worker", std::to_string(w)});
  }
  r->AddScrapeHook([this] { UpdateMetrics(); });
}

void ClusterMonitor::UpdateMetrics() {
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  double sps = 0, loss_sum = 0;
  int loss_n = 0;
  int64_t min_step = INT64_MAX, max_step = INT64_MIN;
  for (const auto* group : {&servers_, &workers_}) {
    int counts[4] = {0, 0, 0, 0};  // waiting, alive, dead, done
    std::string role;
    for (const Node& n : *group) {
      role = RoleText(n.info.role);
      std::string rank = std::to_string(n.info.rank);
      int state = !n.joined ? 0 : n.done ? 3 : n.alive ? 1 : 2;
      ++counts[state];
      heartbeat_age_->Get({role, rank})
          ->Set(n.joined ? absl::ToDoubleSeconds(now - n.last_seen) : std::nan(""));
      node_up_->Get({role, rank})->Set(state == 1 ? 1 : 0);
      if (n.info.role != proto::Role::kWorker || !n.last || state != 1) continue;
      sps += n.last->samples_per_sec;
      if (std::isfinite(n.last->loss)) {
        loss_sum += n.last->loss;
        ++loss_n;
      }
      min_step = std::min(min_step, n.last->step);
      max_step = std::max(max_step, n.last->step);
    }
    if (group->empty()) continue;
    const char* names[4] = {"waiting", "alive", "dead", "done"};
    for (int k = 0; k < 4; ++k) nodes_->Get({role, names[k]})->Set(counts[k]);
  }
  cluster_samples_per_sec_->Set(sps);
  cluster_loss_->Set(loss_n > 0 ? loss_sum / loss_n : std::nan(""));
  step_spread_->Set(min_step <= max_step ? static_cast<double>(max_step - min_step) : 0);
  cluster_eval_auc_->Set(eval_auc_.v.empty() ? std::nan("") : eval_auc_.v.back());
}

}  // namespace pstrain::server
