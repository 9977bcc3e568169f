#include "server/ps/server_metrics.h"

#include <algorithm>
#include <climits>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics/process_metrics.h"

namespace pstrain::server {

using metrics::Registry;

ServerMetrics::ServerMetrics(Registry* r) : registry_(r) {
  metrics::RegisterProcessMetrics(r);
  auto* seconds = r->AddHistogram(
      "pstrain_server_request_seconds",
      "Time from a pull or push arriving to its reply, parked time (SSP/BSP) included.", {"op"},
      metrics::LatencyBuckets());
  pull_seconds_ = seconds->Get({"pull"});
  push_seconds_ = seconds->Get({"push"});
  auto* requests = r->AddCounter("pstrain_server_requests_total", "Pulls and pushes answered.", {"op"});
  requests_pull_ = requests->Get({"pull"});
  requests_push_ = requests->Get({"push"});
  errors_ = r->GetCounter("pstrain_server_request_errors_total", "Requests answered with an error.");
  bsp_steps_ = r->GetCounter("pstrain_server_bsp_steps_total", "BSP steps applied (summed pushes of every worker).");
  parked_ = r->GetGauge("pstrain_server_parked_pulls", "Pulls waiting for the consistency model (SSP/BSP).");
  clock_lead_ = r->GetGauge(
      "pstrain_server_clock_lead",
      "Staleness: clocks (pushes) by which the fastest training worker leads the slowest.");
  slowest_clock_ = r->GetGauge("pstrain_server_slowest_clock", "Clock of the slowest training worker.");
  fastest_clock_ = r->GetGauge("pstrain_server_fastest_clock", "Clock of the fastest training worker.");
  checkpoint_seconds_ = r->AddHistogram("pstrain_server_checkpoint_write_seconds",
                                        "Time to write this server's checkpoint shard.", {},
                                        metrics::LongDurationBuckets())
                            ->Get({});
  auto* writes = r->AddCounter("pstrain_server_checkpoint_writes_total",
                               "Checkpoint shards written, by outcome.", {"outcome"});
  checkpoint_ok_ = writes->Get({"ok"});
  checkpoint_failed_ = writes->Get({"failed"});
  checkpoint_bytes_ = r->GetGauge("pstrain_server_checkpoint_last_bytes",
                                  "Size of the last checkpoint shard written.");
  checkpoint_time_ = r->GetGauge("pstrain_server_checkpoint_last_timestamp_seconds",
                                 "When the last checkpoint shard was written (unix time).");
}

void ServerMetrics::OnTablesCreated(const proto::TableLayout& layout,
                                    absl::FunctionRef<bool(uint32_t table)> held, bool tiered) {
  auto* keys = registry_->AddCounter(
      "pstrain_server_table_keys_total",
      "Keys read or written: sparse rows (ids) or dense floats, by table and op.", {"table", "op"});
  auto* bytes = registry_->AddCounter(
      "pstrain_server_table_bytes_total",
      "Payload bytes of pulls (ids in, values out) and pushes (ids and gradients in), by table.",
      {"table", "op"});
  auto* updates = registry_->AddCounter(
      "pstrain_server_optimizer_updates_total",
      "Optimizer steps applied to the table (one per push part, or per BSP step).", {"table"});
  auto* latency = registry_->AddHistogram(
      "pstrain_server_table_request_seconds",
      "Time from arrival to reply of the pulls and pushes that carried a part of the table "
      "(parked time included), by table and op.",
      {"table", "op"}, metrics::LatencyBuckets());
  auto* rows = registry_->AddGauge("pstrain_server_table_rows",
                                   "Sparse rows, or dense floats, this server holds.", {"table"});
  auto* memory = registry_->AddGauge(
      "pstrain_server_table_memory_bytes",
      "Memory of this server's shard of the table (values, optimizer state, index).", {"table"});
  auto* sketch = registry_->AddGauge(
      "pstrain_server_table_admission_sketch_bytes",
      "Memory of the table's admission sketch on this server (fixed; part of its memory).",
      {"table"});
  auto* admitted = registry_->AddCounter(
      "pstrain_server_table_admitted_total",
      "Ids admitted into the table (rows created by an admitting push) on this server.",
      {"table"});
  auto* refused_ids = registry_->AddCounter(
      "pstrain_server_table_refused_ids_total",
      "Pushed ids not admitted into the table: their gradients were dropped.", {"table"});
  auto* refused_pushes = registry_->AddCounter(
      "pstrain_server_table_refused_pushes_total",
      "Pushes of the table that dropped the gradients of at least one id not admitted.",
      {"table"});
  auto* evicted = registry_->AddCounter(
      "pstrain_server_table_evicted_total",
      "Rows removed from the table on this server by eviction: reason=capacity (max_rows) or "
      "ttl (not updated for ttl_steps).",
      {"table", "reason"});
  metrics::Family<metrics::Gauge>* ram_rows = nullptr;
  metrics::Family<metrics::Gauge>* disk_rows = nullptr;
  metrics::Family<metrics::Gauge>* disk_bytes = nullptr;
  metrics::Family<metrics::Counter>* tier_reads = nullptr;
  metrics::Family<metrics::Counter>* tier_writes = nullptr;
  if (tiered) {
    ram_rows = registry_->AddGauge("pstrain_server_table_ram_rows",
                                   "Sparse rows of the table in this server's RAM (disk tier).",
                                   {"table"});
    disk_rows = registry_->AddGauge(
        "pstrain_server_table_disk_rows",
        "Sparse rows of the table in this server's disk tier (some also in RAM).", {"table"});
    disk_bytes = registry_->AddGauge(
        "pstrain_server_tier_disk_bytes",
        "Bytes of the files of this server's disk tier (all its tables), by table reporting.",
        {"table"});
    tier_reads = registry_->AddCounter(
        "pstrain_server_table_tier_reads_total",
        "Ids of the table not in RAM looked up in the disk tier: result=hit (found, brought "
        "into RAM) or miss (never trained: read as zeros).",
        {"table", "result"});
    tier_writes = registry_->AddCounter(
        "pstrain_server_table_tier_writes_total",
        "Rows of the table written to the disk tier on leaving RAM (new or changed).", {"table"});
  }
  tables_.assign(layout.tables.size(), TableCells{});
  for (const TableSpec& spec : layout.tables) {
    if (spec.id >= tables_.size() || spec.on_workers) continue;
    if (!held(spec.id)) continue;  // not held by this server
    TableCells& c = tables_[spec.id];
    c.sparse = spec.kind == TableKind::kSparse;
    c.value_bytes = c.sparse ? uint64_t{spec.dim} * sizeof(float) : sizeof(float);
    c.pull_keys = keys->Get({spec.name, "pull"});
    c.push_keys = keys->Get({spec.name, "push"});
    c.pull_bytes = bytes->Get({spec.name, "pull"});
    c.push_bytes = bytes->Get({spec.name, "push"});
    c.updates = updates->Get({spec.name});
    c.pull_seconds = latency->Get({spec.name, "pull"});
    c.push_seconds = latency->Get({spec.name, "push"});
    c.rows = rows->Get({spec.name});
    c.memory = memory->Get({spec.name});
    if (c.sparse && spec.admission.enabled()) {
      c.sketch_bytes = sketch->Get({spec.name});
      c.admitted = admitted->Get({spec.name});
      c.refused_ids = refused_ids->Get({spec.name});
      c.refused_pushes = refused_pushes->Get({spec.name});
    }
    if (c.sparse && spec.eviction.enabled()) {
      c.evicted_capacity = evicted->Get({spec.name, "capacity"});
      c.evicted_ttl = evicted->Get({spec.name, "ttl"});
    }
    if (c.sparse && tiered) {
      c.ram_rows = ram_rows->Get({spec.name});
      c.disk_rows = disk_rows->Get({spec.name});
      c.disk_bytes = disk_bytes->Get({spec.name});
      c.tier_hits = tier_reads->Get({spec.name, "hit"});
      c.tier_misses = tier_reads->Get({spec.name, "miss"});
      c.tier_writes = tier_writes->Get({spec.name});
    }
    table_ids_[spec.name] = spec.id;
  }
}

void ServerMetrics::CountOps(const std::vector<KvOp>& ops, bool pull, bool applied_now,
                             double seconds) {
  uint32_t previous = UINT32_MAX;  // one observation per table even if it came in several parts
  for (const KvOp& op : ops) {
    if (op.table >= tables_.size() || tables_[op.table].pull_keys == nullptr) continue;
    TableCells& c = tables_[op.table];
    if (op.table != previous) (pull ? c.pull_seconds : c.push_seconds)->Observe(seconds);
    previous = op.table;
    uint64_t id_bytes = c.sparse ? op.count * sizeof(uint64_t) : 0;
    uint64_t value_bytes = op.count * c.value_bytes;
    (pull ? c.pull_keys : c.push_keys)->Inc(static_cast<double>(op.count));
    (pull ? c.pull_bytes : c.push_bytes)->Inc(static_cast<double>(id_bytes + value_bytes));
    bytes_in_ += pull ? id_bytes : id_bytes + value_bytes;
    if (pull) bytes_out_ += value_bytes;
    if (!pull) {
      if (applied_now) {
        c.updates->Inc();
      } else {
        c.pending_bsp = true;
      }
    }
  }
}

void ServerMetrics::OnPullServed(const std::vector<KvOp>& ops) {
  const double seconds = static_cast<double>(metrics::MonotonicNanos() - request_start_ns_) * 1e-9;
  CountOps(ops, /*pull=*/true, false, seconds);
  ++requests_;
  requests_pull_->Inc();
  pull_seconds_->Observe(seconds);
}

void ServerMetrics::OnPushApplied(const std::vector<KvOp>& ops, bool applied_now) {
  const double seconds = static_cast<double>(metrics::MonotonicNanos() - request_start_ns_) * 1e-9;
  CountOps(ops, /*pull=*/false, applied_now, seconds);
  ++requests_;
  requests_push_->Inc();
  push_seconds_->Observe(seconds);
}

void ServerMetrics::OnBspStepApplied() {
  bsp_steps_->Inc();
  for (TableCells& c : tables_) {
    if (!c.pending_bsp) continue;
    c.pending_bsp = false;
    c.updates->Inc();
  }
}

void ServerMetrics::Sample(const std::vector<TableStats>* stats, const std::vector<int64_t>& pushed,
                           const std::vector<bool>& retired, size_t parked, proto::Heartbeat* hb) {
  metrics::ProcessUsage usage = metrics::ReadProcessUsage();
  hb->rss_bytes = usage.resident_bytes;
  hb->cpu_seconds = usage.cpu_seconds;
  hb->requests = requests_;
  hb->bytes_in = bytes_in_;
  hb->bytes_out = bytes_out_;
  parked_->Set(static_cast<double>(parked));
  if (stats == nullptr) return;
  uint64_t rows = 0, bytes = 0;
  for (const TableStats& t : *stats) {
    rows += t.rows;
    bytes += t.bytes;
    auto it = table_ids_.find(t.name);
    if (it == table_ids_.end()) continue;
    tables_[it->second].rows->Set(static_cast<double>(t.rows));
    TableCells& c = tables_[it->second];
    c.memory->Set(static_cast<double>(t.bytes));
    if (c.admitted != nullptr) {
      c.sketch_bytes->Set(static_cast<double>(t.sketch_bytes));
      c.admitted->SetTotal(static_cast<double>(t.admitted));
      c.refused_ids->SetTotal(static_cast<double>(t.refused_ids));
      c.refused_pushes->SetTotal(static_cast<double>(t.refused_pushes));
    }
    if (c.evicted_capacity != nullptr) {
      c.evicted_capacity->SetTotal(static_cast<double>(t.evicted_capacity));
      c.evicted_ttl->SetTotal(static_cast<double>(t.evicted_ttl));
    }
    if (c.ram_rows != nullptr && t.tiered) {
      c.ram_rows->Set(static_cast<double>(t.ram_rows));
      c.disk_rows->Set(static_cast<double>(t.disk_rows));
      c.disk_bytes->Set(static_cast<double>(t.tier_disk_bytes));
      c.tier_hits->SetTotal(static_cast<double>(t.tier_hits));
      c.tier_misses->SetTotal(static_cast<double>(t.tier_reads - t.tier_hits));
      c.tier_writes->SetTotal(static_cast<double>(t.tier_writes));
    }
  }
  hb->table_rows = rows;
  hb->table_bytes = bytes;
  int64_t slowest = INT64_MAX, fastest = INT64_MIN;
  for (size_t w = 0; w < pushed.size() && w < retired.size(); ++w) {
    if (retired[w]) continue;
    slowest = std::min(slowest, pushed[w]);
    fastest = std::max(fastest, pushed[w]);
  }
  if (slowest <= fastest) {
    slowest_clock_->Set(static_cast<double>(slowest));
    fastest_clock_->Set(static_cast<double>(fastest));
    clock_lead_->Set(static_cast<double>(fastest - slowest));
  } else {
    clock_lead_->Set(0);
  }
}

void ServerMetrics::RecordCheckpointWrite(double seconds, uint64_t bytes, bool ok) {
  if (!ok) {
    checkpoint_failed_->Inc();
    return;
  }
  checkpoint_ok_->Inc();
  checkpoint_seconds_->Observe(seconds);
  checkpoint_bytes_->Set(static_cast<double>(bytes));
  checkpoint_time_->Set(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
}

}  // namespace pstrain::server
