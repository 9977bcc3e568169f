// pstrain predict: scores a file with an exported model, in one process.
#include <cstdio>

#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "worker/predictor.h"

namespace pstrain::launcher {

namespace {

FlagSet PredictFlags() {
  FlagSet flags;
  flags.Define("model", "", "Folder written by --save_model (model.json + table files).")
      .Define("data", "", "Rows to score: comma-separated paths or globs, in the training format.")
      .Define("out", "", "Write one click probability per line here (optional).")
      .Define("batch_size", "4096", "Rows per batch.");
  return flags;
}

}  // namespace

std::string PredictHelp() {
  return absl::StrCat(
      "usage: pstrain predict --model=DIR --data=FILES [--out=SCORES]\n\n"
      "Scores every row of FILES with the exported model in DIR (no cluster needed),\n"
      "writes the probabilities to SCORES and prints AUC and log loss against the\n"
      "files' labels.\n\n",
      PredictFlags().Help());
}

absl::Status RunPredict(const std::vector<std::string>& argv) {
  FlagSet flags = PredictFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  PS_ASSIGN_OR_RETURN(int64_t batch, flags.GetInt("batch_size"));
  worker::PredictOptions o;
  o.model_dir = flags.Get("model");
  o.data = absl::StrSplit(flags.Get("data"), ',', absl::SkipEmpty());
  o.out = flags.Get("out");
  if (o.model_dir.empty() || o.data.empty()) return UsageError("--model and --data are required");
  if (batch < 1) return UsageError("--batch_size must be >= 1");
  o.batch_size = static_cast<int>(batch);
  PS_ASSIGN_OR_RETURN(auto r, worker::PredictFile(o));
  std::printf("scored %lld rows in %.1f s: AUC %.4f, logloss %.4f, accuracy %.4f%s%s\n",
              static_cast<long long>(r.rows), r.seconds, r.metrics.auc, r.metrics.logloss,
              r.metrics.accuracy, o.out.empty() ? "" : "; scores in ", o.out.c_str());
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
