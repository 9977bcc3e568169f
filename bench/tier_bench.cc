#include "bench/tier_bench.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/sparse_bench.h"
#include "common/hash.h"
#include "common/metrics/process_metrics.h"
#include "common/status.h"
#include "data/zipf.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::bench {
namespace {

using server::KvStore;
using server::SparseTable;

constexpr size_t kFillBatch = 8192;

uint64_t IdOf(uint64_t rank) { return Mix64(rank); }

uint64_t Rss() { return metrics::ReadProcessUsage().resident_bytes; }

// Trains every row once: one push per id, in batches.
absl::Status Fill(SparseTable& t, uint64_t rows, const char* run) {
  std::vector<uint64_t> ids;
  std::vector<float> grads(kFillBatch * t.dim());
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * float(i % 7) - 0.03f;
  const auto start = Clock::now();
  double next_log = 10;
  for (uint64_t begin = 0; begin < rows; begin += kFillBatch) {
    ids.clear();
    for (uint64_t r = begin; r < std::min(rows, begin + kFillBatch); ++r) ids.push_back(IdOf(r));
    PS_RETURN_IF_ERROR(t.Push(ids, grads.data(), 1.0f));
    if (SecondsSince(start) > next_log) {
      spdlog::info("sparse_tier {}: {} of {} rows trained", run, begin + ids.size(), rows);
      next_log += 10;
    }
  }
  const double s = SecondsSince(start);
  JsonLine line;
  line.Add("bench", "sparse_tier")
      .Add("run", run)
      .Add("phase", "fill")
      .Add("rows", static_cast<uint64_t>(t.size()))
      .Add("ram_rows", static_cast<uint64_t>(t.ram_rows()))
      .Add("seconds", s)
      .Add("rows_per_sec", rows / s)
      .Add("rss_bytes", Rss());
  PrintResult(line);
  return absl::OkStatus();
}

// An order-free digest of every row (id, values, state, step).
absl::StatusOr<std::pair<uint64_t, uint64_t>> Digest(const SparseTable& t) {
  uint64_t sum = 0, n = 0;
  PS_RETURN_IF_ERROR(t.ForEachRow([&](const server::SparseRow& r) {
    uint64_t h = Mix64(r.id ^ (uint64_t{r.step} << 32));
    auto add = [&h](std::span<const float> v) {
      for (float f : v) {
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof(bits));
        h = Mix64(h ^ bits);
      }
    };
    add(r.values);
    add(r.state);
    sum += h;
    ++n;
  }));
  return std::make_pair(sum, n);
}

// Pulls Zipf-drawn rows for `seconds`; rows/s.
absl::StatusOr<double> TimePulls(SparseTable& t, const TierBenchOptions& o, uint64_t seed,
                                 double seconds, uint64_t* pulled = nullptr) {
  worker::ZipfSampler zipf(o.rows, o.zipf);
  std::mt19937_64 rng(seed);
  auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  std::vector<uint64_t> ids(o.ids);
  std::vector<float> out(ids.size() * t.dim());
  uint64_t rows = 0;
  // Only the pulls are timed: drawing Zipf ids costs about as much as a
  // pull of a row in RAM, and would hide half of the difference.
  double pulling = 0;
  while (pulling < seconds) {
    for (auto& id : ids) id = IdOf(zipf.Sample(uniform) - 1);
    const auto start = Clock::now();
    PS_RETURN_IF_ERROR(t.Pull(ids, out.data()));
    pulling += SecondsSince(start);
    rows += ids.size();
  }
  if (pulled != nullptr) *pulled += rows;
  return rows / pulling;
}

absl::StatusOr<std::unique_ptr<KvStore>> Store(const proto::TableLayout& layout,
                                               const server::TierConfig& tier) {
  return KvStore::Create(layout, 0, 0, 1, tier);
}

}  // namespace

absl::Status RunTierBench(const TierBenchOptions& o) {
  if (o.rows < 10000 || o.dim < 1 || !(o.ram_fraction > 0 && o.ram_fraction < 1) ||
      o.ids < 1 || o.rounds < 1 || !(o.zipf > 0)) {
    return absl::InvalidArgumentError(
        "sparse_tier: want --rows >= 10000, --dim >= 1, --ram_fraction in (0, 1), --ids >= 1, "
        "--rounds >= 1, --zipf > 0");
  }
  namespace fs = std::filesystem;
  const std::string dir =
      o.dir.empty() ? (fs::temp_directory_path() / absl::StrCat("pstrain-tier-bench-", ::getpid()))
                          .string()
                    : o.dir;
  fs::create_directories(dir);
  std::vector<TableSpec> tables = SparseBenchTable(o.dim, RowDtype::kFloat32, o.optimizer);
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout, server::ComputeLayout(tables, 1, 1 << 20));

  // The budget that keeps ram_fraction of the rows in RAM (KvStore's own
  // arithmetic, from a probe table's row size).
  PS_ASSIGN_OR_RETURN(auto probe, Store(layout, {}));
  const uint64_t row_cost = probe->sparse(0)->row_bytes() + 2 * sizeof(float) + 23;
  probe.reset();
  server::TierConfig tier;
  tier.dir = dir + "/tier";
  if (o.store != "slots" && o.store != "rocksdb") {
    return absl::InvalidArgumentError("sparse_tier: --tier_store is slots or rocksdb");
  }
  tier.store = o.store == "slots" ? server::TierStore::kSlots : server::TierStore::kRocksDb;
  // The slot store's id index is part of the budget too: a RowIndex of
  // 12-byte slots (at most 0.8 full, grown by half from 16) and 4 bytes of
  // use counts per row (a vector grown by half).
  uint64_t index_slots = 16, use_slots = 0;
  while (index_slots / 5 * 4 < o.rows) index_slots += index_slots / 2;
  while (use_slots < o.rows) use_slots = use_slots / 2 * 3 + 1024;
  const uint64_t index_bytes =
      tier.store == server::TierStore::kSlots ? index_slots * 12 + use_slots * 4 : 0;
  tier.memory_budget = server::DiskTier::kFixedBytes + KvStore::kProcessBytes + index_bytes +
                       static_cast<uint64_t>(o.ram_fraction * o.rows) * row_cost;
  const uint64_t rss_before = Rss();
  PS_ASSIGN_OR_RETURN(auto tiered, Store(layout, tier));
  SparseTable& t = *tiered->sparse(0);
  PS_RETURN_IF_ERROR(Fill(t, o.rows, "tiered"));
  const uint64_t rss_tiered = Rss();

  // Checkpoint and restore: identical rows.
  PS_ASSIGN_OR_RETURN(auto before, Digest(t));
  auto start = Clock::now();
  const std::string shard = dir + "/shard0.bin";
  PS_RETURN_IF_ERROR(tiered->SaveShard(shard, 1).status());
  const double save_s = SecondsSince(start);
  server::TierConfig tier2 = tier;
  tier2.dir = dir + "/tier-restored";
  start = Clock::now();
  std::pair<uint64_t, uint64_t> after;
  uint64_t restored_ram_rows = 0;
  {
    PS_ASSIGN_OR_RETURN(auto restored, Store(layout, tier2));
    PS_RETURN_IF_ERROR(restored->Restore({shard}));
    restored_ram_rows = restored->sparse(0)->ram_rows();
    PS_ASSIGN_OR_RETURN(after, Digest(*restored->sparse(0)));
  }
  const double restore_s = SecondsSince(start);
  fs::remove_all(tier2.dir);
  fs::remove(shard);
  {
    JsonLine line;
    line.Add("bench", "sparse_tier")
        .Add("run", "tiered")
        .Add("phase", "checkpoint")
        .Add("rows", before.second)
        .Add("save_seconds", save_s)
        .Add("restore_seconds", restore_s)
        .Add("restored_rows", after.second)
        .Add("restored_ram_rows", restored_ram_rows)
        .Add("identical", before == after);
    PrintResult(line);
  }

  // The same table with every row in RAM.
  PS_ASSIGN_OR_RETURN(auto ram, Store(layout, {}));
  SparseTable& r = *ram->sparse(0);
  PS_RETURN_IF_ERROR(Fill(r, o.rows, "ram"));

  // Warm the tier's RAM rows, then alternate timed windows.
  PS_RETURN_IF_ERROR(TimePulls(t, o, 1, o.seconds).status());
  const server::TierCounters warm = t.tier_counters();
  std::vector<double> tiered_rps, ram_rps;
  uint64_t pulled = 0;  // rows pulled from the tiered table in the timed windows
  for (int k = 0; k < o.rounds; ++k) {
    PS_ASSIGN_OR_RETURN(double a, TimePulls(t, o, 100 + k, o.seconds, &pulled));
    PS_ASSIGN_OR_RETURN(double b, TimePulls(r, o, 100 + k, o.seconds));
    tiered_rps.push_back(a);
    ram_rps.push_back(b);
    JsonLine line;
    line.Add("bench", "sparse_tier").Add("phase", "pull").Add("round", k)
        .Add("tiered_rows_per_sec", a).Add("ram_rows_per_sec", b).Add("ratio", a / b);
    PrintResult(line);
  }
  const server::TierCounters& c = t.tier_counters();
  const server::MemoryStats m = t.memory_stats();
  JsonLine line;
  line.Add("bench", "sparse_tier")
      .Add("summary", true)
      .Add("rows", o.rows)
      .Add("dim", static_cast<int64_t>(o.dim))
      .Add("parameters", o.rows * o.dim)
      .Add("optimizer", optim::OptimizerKindName(o.optimizer))
      .Add("tier_store", o.store)
      .Add("server_memory_budget", tier.memory_budget)
      .Add("ram_rows", static_cast<uint64_t>(m.ram_rows))
      .Add("disk_rows", static_cast<uint64_t>(m.disk_rows))
      .Add("ram_fraction", static_cast<double>(m.ram_rows) / o.rows)
      .Add("rss_before_bytes", rss_before)
      .Add("rss_tiered_bytes", rss_tiered)
      .Add("tiered_under_budget", rss_tiered <= tier.memory_budget)
      .Add("tier_disk_bytes", t.tier()->disk_bytes())
      .Add("zipf", o.zipf)
      .Add("ram_hit_rate", 1.0 - (c.reads - warm.reads) / std::max(1.0, double(pulled)))
      .Add("served_from_disk", (c.served - warm.served) / std::max(1.0, double(pulled)))
      .Add("tiered_rows_per_sec", Median(tiered_rps))
      .Add("ram_rows_per_sec", Median(ram_rps))
      .Add("ratio", Median(tiered_rps) / Median(ram_rps))
      .Add("restored_identical", before == after);
  PrintResult(line);
  tiered.reset();
  fs::remove_all(dir);
  return absl::OkStatus();
}

}  // namespace pstrain::bench
