// pstrain predict: scores a file with an exported model, in one process.
#include <cstdio>

#include "absl/strings/str_split.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "worker/predictor.h"

namespace pstrain::launcher {

int RunPredict(const std::vector<std::string>& argv) {
  FlagSet flags;
  flags.Define("model", "", "Folder written by --save_model (model.json + table files).")
      .Define("data", "", "Rows to score: comma-separated paths or globs, in the training format.")
      .Define("out", "", "Write one click probability per line here (optional).")
      .Define("batch_size", "4096", "Rows per batch.");
  if (WantsHelp(argv)) {
    std::printf(
        "usage: pstrain predict --model=DIR --data=FILES [--out=SCORES]\n\n"
        "Scores every row of FILES with the exported model in DIR (no cluster needed),\n"
        "writes the probabilities to SCORES and prints AUC and log loss against the\n"
        "files' labels.\n\n%s",
        flags.Help().c_str());
    return 0;
  }
  auto args = ParseArgs(argv);
  absl::Status st = args.status();
  if (st.ok()) st = flags.Take(*args, false).status();
  auto batch = flags.GetInt("batch_size");
  if (st.ok()) st = batch.status();
  worker::PredictOptions o;
  o.model_dir = flags.Get("model");
  o.data = absl::StrSplit(flags.Get("data"), ',', absl::SkipEmpty());
  o.out = flags.Get("out");
  if (st.ok() && (o.model_dir.empty() || o.data.empty())) {
    st = absl::InvalidArgumentError("--model and --data are required");
  }
  if (!st.ok()) {
    std::fprintf(stderr, "pstrain predict: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  o.batch_size = static_cast<int>(*batch);
  auto r = worker::PredictFile(o);
  if (!r.ok()) {
    std::fprintf(stderr, "pstrain predict: %s\n", r.status().ToString().c_str());
    return 1;
  }
  std::printf("scored %lld rows in %.1f s: AUC %.4f, logloss %.4f, accuracy %.4f%s%s\n",
              static_cast<long long>(r->rows), r->seconds, r->metrics.auc, r->metrics.logloss,
              r->metrics.accuracy, o.out.empty() ? "" : "; scores in ", o.out.c_str());
  return 0;
}

}  // namespace pstrain::launcher
