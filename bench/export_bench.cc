#include "bench/export_bench.h"

#include <unistd.h>

#include <filesystem>
#include <random>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "bench/sparse_bench.h"
#include "common/hash.h"
#include "common/status.h"
#include "serve/model_versions.h"
#include "server/coordinator/table_layout.h"
#include "server/ps/kv_store.h"

namespace pstrain::bench {
namespace {

namespace fs = std::filesystem;
using server::KvStore;

constexpr size_t kBatch = 8192;
constexpr uint64_t kPageRows = 1 << 18;  // rows per dump page (the lead's request size)

uint64_t IdOf(uint64_t rank) { return Mix64(rank + 1); }

absl::Status PushRanks(KvStore& store, const std::vector<uint64_t>& ranks, uint32_t dim) {
  std::vector<uint64_t> ids;
  std::vector<float> grads(kBatch * dim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * float(i % 7) - 0.03f;
  for (size_t begin = 0; begin < ranks.size(); begin += kBatch) {
    ids.clear();
    for (size_t i = begin; i < std::min(ranks.size(), begin + kBatch); ++i) ids.push_back(IdOf(ranks[i]));
    PS_RETURN_IF_ERROR(store.sparse(0)->Push(ids, grads.data(), 1.0f));
  }
  return absl::OkStatus();
}

struct Exported {
  uint64_t rows = 0, bytes = 0;
  double dump_seconds = 0, write_seconds = 0;
};

// Version `seq` of `store`'s table: a base, or a delta since seq - 1.
absl::StatusOr<Exported> ExportVersion(KvStore& store, const std::string& dir, uint64_t seq,
                                       bool delta) {
  Exported e;
  worker::SavedModel saved;
  saved.step = static_cast<int64_t>(seq);
  saved.exported = {seq, delta, delta ? seq - 1 : seq, 0};
  worker::TableValues t;
  t.spec = store.layout().tables[0];
  auto start = Clock::now();
  PS_RETURN_IF_ERROR(store.CutChanges(0, seq, !delta, seq - 1));
  for (uint64_t offset = 0;; offset += kPageRows) {
    const size_t before = t.ids.size() + t.removed.size();
    absl::StatusOr<uint64_t> total =
        delta ? store.DumpChanges(0, offset, kPageRows, &t.ids, &t.rows, &t.removed)
              : store.Dump(0, offset, kPageRows, &t.ids, &t.rows);
    PS_RETURN_IF_ERROR(total.status());
    if (t.ids.size() + t.removed.size() == before || offset + kPageRows >= *total) break;
  }
  e.dump_seconds = SecondsSince(start);
  e.rows = t.ids.size();
  saved.tables.push_back(std::move(t));
  start = Clock::now();
  PS_RETURN_IF_ERROR(worker::WriteVersion(dir, saved));
  e.write_seconds = SecondsSince(start);
  e.bytes = worker::VersionBytes(dir, seq);
  return e;
}

void Print(const char* kind, const Exported& e) {
  JsonLine line;
  line.Add("bench", "export")
      .Add("kind", kind)
      .Add("rows", e.rows)
      .Add("bytes", e.bytes)
      .Add("bytes_per_row", e.rows > 0 ? double(e.bytes) / double(e.rows) : 0.0)
      .Add("dump_seconds", e.dump_seconds)
      .Add("write_seconds", e.write_seconds);
  PrintResult(line);
}

}  // namespace

absl::Status RunExportBench(const ExportBenchOptions& o) {
  if (o.rows < 1000 || o.dim < 1 || !(o.changed > 0 && o.changed <= 1)) {
    return absl::InvalidArgumentError(
        "export: want --export_rows >= 1000, --dim >= 1, --export_changed in (0, 1]");
  }
  const std::string dir =
      o.dir.empty() ? (fs::temp_directory_path() / absl::StrCat("pstrain-export-bench-", ::getpid()))
                          .string()
                    : o.dir;
  fs::remove_all(dir);
  RemoveDirOnExit cleanup{dir};
  PS_ASSIGN_OR_RETURN(proto::TableLayout layout,
                      server::ComputeLayout(SparseBenchTable(o.dim), 1, 1 << 20));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> store, KvStore::Create(layout, 0));
  std::vector<uint64_t> all(o.rows);
  for (uint64_t r = 0; r < o.rows; ++r) all[r] = r;
  auto start = Clock::now();
  PS_RETURN_IF_ERROR(PushRanks(*store, all, o.dim));
  spdlog::info("export: {} rows trained in {:.1f}s", o.rows, SecondsSince(start));

  PS_ASSIGN_OR_RETURN(Exported base, ExportVersion(*store, dir, 1, /*delta=*/false));
  Print("base", base);
  // A random `changed` fraction of the rows, pushed again.
  std::mt19937_64 rng(7);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::max<uint64_t>(1, static_cast<uint64_t>(o.changed * double(o.rows))));
  const uint64_t changed = all.size();
  PS_RETURN_IF_ERROR(PushRanks(*store, all, o.dim));
  PS_ASSIGN_OR_RETURN(Exported delta, ExportVersion(*store, dir, 2, /*delta=*/true));
  Print("delta", delta);
  if (delta.rows != changed) {
    return absl::InternalError(absl::StrCat("export: the delta holds ", delta.rows, " rows, ",
                                            changed, " were changed"));
  }
  JsonLine summary;
  summary.Add("bench", "export")
      .Add("summary", true)
      .Add("table_rows", o.rows)
      .Add("dim", static_cast<uint64_t>(o.dim))
      .Add("changed_fraction", o.changed)
      .Add("base_bytes", base.bytes)
      .Add("delta_bytes", delta.bytes)
      .Add("delta_bytes_ratio", double(delta.bytes) / double(base.bytes))
      .Add("delta_bytes_per_changed_row", double(delta.bytes) / double(delta.rows))
      .Add("delta_seconds_ratio", (delta.dump_seconds + delta.write_seconds) /
                                      (base.dump_seconds + base.write_seconds));
  PrintResult(summary);
  return absl::OkStatus();
}

}  // namespace pstrain::bench
