// The lead's exports: the tables it collects, and --export_dir's versions
// (bases and deltas, serve/model_versions.h).
#include <filesystem>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/json_line.h"
#include "common/status.h"
#include "serve/model_versions.h"
#include "worker/kv_client.h"
#include "worker/progress.h"
#include "worker/trainer.h"

namespace pstrain::worker {
absl::Status Trainer::CollectTables(int64_t step, const proto::DumpRequest& dump,
                                    SavedModel* saved, uint64_t* rows) {
  saved->tables.clear();
  *rows = 0;
  PS_ASSIGN_OR_RETURN(std::vector<Buffer> dense, kv_->Pull(dense_tables_, {}, step).Wait());
  for (const TableSpec& spec : model_->tables()) {
    TableValues t;
    t.spec = spec;
    if (spec.kind == TableKind::kSparse) {
      PS_RETURN_IF_ERROR(kv_->DumpExport(spec.id, dump, &t.ids, &t.rows, &t.removed));
      t.missing_as_zeros =
          options_.zero_untrained || options_.admission.enabled() || options_.eviction.enabled();
      *rows += t.ids.size();
    } else if (replica_ != nullptr && replica_->holds(spec.id)) {
      t.dense = replica_->weights(spec.id);
    } else {
      size_t k = std::find(dense_tables_.begin(), dense_tables_.end(), spec.id) - dense_tables_.begin();
      auto v = dense[k].as<float>();
      t.dense.assign(v.begin(), v.end());
    }
    saved->tables.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status Trainer::ExportVersion(int64_t step) {
  const absl::Time t0 = absl::Now();
  const std::string& dir = options_.export_dir;
  if (!export_dir_read_) {
    // A job continuing an export folder numbers on from its LATEST (and may
    // send a delta on top of it, when the servers tracked changes since).
    absl::StatusOr<uint64_t> latest = ReadLatest(dir);
    if (latest.ok()) {
      export_latest_ = *latest;
      absl::StatusOr<ExportInfo> info = ReadVersionInfo(dir, *latest);
      export_base_ = info.ok() ? info->base : 0;
    } else if (!absl::IsNotFound(latest.status())) {
      return Annotate(latest.status(), "--export_dir");
    }
    export_dir_read_ = true;
  }
  SavedModel saved;
  saved.model = options_.model;
  saved.schema = options_.schema;
  saved.step = step;
  ExportInfo& x = saved.exported;
  x.seq = export_latest_ + 1;
  x.delta = export_latest_ > 0 && export_base_ > 0 &&
            export_latest_ - export_base_ < static_cast<uint64_t>(options_.export_base_every);
  proto::DumpRequest dump;
  dump.seq = x.seq;
  dump.since = export_latest_;
  dump.mode = x.delta ? proto::DumpMode::kChanged : proto::DumpMode::kAll;
  uint64_t rows = 0;
  absl::Status collected = CollectTables(step, dump, &saved, &rows);
  if (x.delta && absl::IsFailedPrecondition(collected)) {
    spdlog::info("export: version {} is a base: {}", x.seq, std::string(collected.message()));
    x.delta = false;
    dump.mode = proto::DumpMode::kAll;
    collected = CollectTables(step, dump, &saved, &rows);
  }
  PS_RETURN_IF_ERROR(Annotate(collected, absl::StrCat("exporting version ", x.seq)));
  x.base = x.delta ? export_base_ : x.seq;
  x.exported_unix_ms = absl::ToUnixMillis(absl::Now());
  uint64_t removed = 0;
  for (const TableValues& t : saved.tables) removed += t.removed.size();
  PS_RETURN_IF_ERROR(Annotate(WriteVersion(dir, saved),
                              absl::StrCat("writing version ", x.seq, " to ", dir)));
  export_latest_ = x.seq;
  export_step_ = step;
  const uint64_t bytes = VersionBytes(dir, x.seq);
  int pruned = 0;
  if (!x.delta) {
    export_base_ = x.seq;
    absl::StatusOr<int> p = PruneVersions(dir, options_.export_keep_bases);
    if (!p.ok()) {
      spdlog::warn("export: could not prune the old versions of {}: {}", dir,
                   std::string(p.status().message()));
    } else {
      pruned = *p;
    }
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  spdlog::info("export: version {} ({}{}) of step {} written to {}: {} embedding rows{}, {} bytes, "
               "{:.2f}s{}",
               x.seq, x.delta ? "a delta on base " : "a base", x.delta ? std::to_string(x.base) : "",
               step, dir, rows, removed > 0 ? absl::StrCat(", ", removed, " removed") : "", bytes,
               seconds, pruned > 0 ? absl::StrCat("; ", pruned, " old versions pruned") : "");
  if (metrics_) {
    JsonLine line;
    line.Add("event", "export")
        .Add("version", x.seq)
        .Add("kind", x.delta ? "delta" : "base")
        .Add("base", x.base)
        .Add("step", step)
        .Add("rows", rows)
        .Add("removed", removed)
        .Add("bytes", bytes)
        .Add("seconds", seconds);
    metrics_->Write(line);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
