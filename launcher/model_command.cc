// pstrain model inspect DIR: what an exported model (--save_model,
// --export_every_steps/_secs) holds, with every table file's checksum
// verified: the version `pstrain serve` reports, the step, the schema's
// columns and each table's rows and bytes.
#include <sys/stat.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status.h"
#include "launcher/commands.h"
#include "worker/model_io.h"

namespace pstrain::launcher {
namespace {

absl::Status Inspect(const std::string& dir) {
  const std::string manifest = dir + "/model.json";
  PS_ASSIGN_OR_RETURN(std::string text, ReadFileToString(manifest));
  // ReadModel verifies every table file's size and checksum, naming a bad one.
  absl::StatusOr<worker::SavedModel> model = worker::ReadModel(dir);
  if (!model.ok()) {
    return absl::DataLossError(absl::StrCat(dir, " is not a whole model: ", model.status().message()));
  }
  Checksum64 sum;
  sum.Update(text.data(), text.size());
  struct stat st {};
  std::string written = "?";
  if (::stat(manifest.c_str(), &st) == 0) {
    written = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromTimeT(st.st_mtime), absl::UTCTimeZone());
  }
  std::printf("model %s\n  version %016llx (as pstrain serve reports it), step %lld, exported %s\n",
              dir.c_str(), static_cast<unsigned long long>(sum.Digest()),
              static_cast<long long>(model->step), written.c_str());
  std::printf("  model %s, %d dense and %d categorical columns, embedding dim %d\n",
              model->model.name.c_str(), model->schema.num_dense, model->schema.num_sparse,
              model->model.embedding_dim);
  if (!model->chosen.metric.empty()) {
    std::printf("  kept by --keep_best: %s at round %d (step %lld), eval AUC %.5f, logloss %.5f\n",
                model->chosen.metric.c_str(), model->chosen.round,
                static_cast<long long>(model->chosen.step), model->chosen.eval_auc,
                model->chosen.eval_logloss);
  }
  std::printf("  %-24s %-7s %14s %14s\n", "table", "kind", "rows/values", "bytes");
  uint64_t rows = 0, bytes = 0;
  for (const worker::TableValues& t : model->tables) {
    const bool sparse = t.spec.kind == TableKind::kSparse;
    const uint64_t n = sparse ? t.ids.size() : t.dense.size();
    const uint64_t b = sparse ? t.ids.size() * 8 + t.rows.size() * 4 : t.dense.size() * 4;
    if (sparse) rows += n;
    bytes += b;
    std::printf("  %-24s %-7s %14llu %14llu\n", t.spec.name.c_str(), sparse ? "sparse" : "dense",
                static_cast<unsigned long long>(n), static_cast<unsigned long long>(b));
  }
  std::printf("  %llu embedding rows, %llu bytes of values; all checksums verified\n",
              static_cast<unsigned long long>(rows), static_cast<unsigned long long>(bytes));
  return absl::OkStatus();
}

}  // namespace

std::string ModelHelp() {
  return "usage: pstrain model inspect DIR\n\n"
         "Lists an exported model's version (as `pstrain serve` reports it), step, export time,\n"
         "columns and tables (rows, bytes), verifying every table file's checksum. DIR is a\n"
         "--save_model folder. Exit code 1 when it is not a whole model (a file missing or\n"
         "corrupt, named). Models are full exports: delta versions are not built yet.\n";
}

absl::Status RunModel(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "inspect") return Inspect(args[1]);
  return UsageError("expected `pstrain model inspect DIR` (see --help)");
}

}  // namespace pstrain::launcher
