// The worker's flags that shape how a model learns beyond its optimizer:
// biases' and embeddings' start, dropout, per-table L2, the learning-rate decay, and what
// untrained embedding rows read as.
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "model/models/model.h"
#include "worker/flags/worker_flags.h"

ABSL_FLAG(std::string, table_weight_decay, "",
          "Per-table L2 weight decay overriding --weight_decay: NAME=VALUE,... where NAME is a "
          "table (emb.C1, top.0.weight, ...) or a prefix ending in * (emb.*); the last match "
          "wins, and every NAME must match a table of the model.");
ABSL_FLAG(std::string, bias_init, "uniform",
          "How the MLPs' biases start: uniform (PyTorch nn.Linear's U(+-1/sqrt(fan_in))) or zeros.");
ABSL_FLAG(std::string, embedding_init, "uniform:0.1",
          "How embedding rows start: uniform:SCALE (U(+-SCALE)), normal:SCALE (N(0, SCALE^2)), "
          "uniform:1/sqrt(dim), uniform:sqrt(1/rows) (TorchRec's; rows = the column's "
          "hash_buckets) or zeros. A model file's embedding_init and table_init override it "
          "per file and per table. The default was chosen by DLRM's eval AUC over 3 seeds on "
          "three data sets (README, \"Initializers\").");
ABSL_FLAG(std::string, table_init, "",
          "Per-table embedding initializers over --embedding_init and the model file's: "
          "NAME=INIT,... where NAME is a table (emb.user) or a prefix ending in * and INIT one "
          "of --embedding_init's forms; the last match wins, and every NAME must match a table.");
ABSL_FLAG(double, dropout, 0,
          "Dropout rate of the towers' hidden layers while training (dlrm/dcn_v2 top MLP, "
          "wide_deep/deepfm deep MLP; 0: off). Evaluation and serving never drop.");
ABSL_FLAG(int64_t, lr_decay_steps, 0,
          "Decay every learning rate linearly over N steps, from --lr_decay_start on, to "
          "--lr_decay_end x its value, then keep it there (0: no decay). Applied like the warm-up.");
ABSL_FLAG(int64_t, lr_decay_start, 0, "The step the --lr_decay_steps decay starts at.");
ABSL_FLAG(double, lr_decay_end, 0.0, "The fraction of the learning rate left after the decay, in [0, 1].");
ABSL_FLAG(std::string, untrained_rows, "init",
          "What an embedding row no push has trained reads as: init (the initializer's random "
          "value, as PyTorch's nn.Embedding) or zeros (an unseen id adds nothing, in training, "
          "evaluation and serving; its first push creates the row at the initializer's value). "
          "ps and allreduce modes; pipeline mode always uses init.");

namespace pstrain::worker {
namespace {

// NAME=VALUE,... (finite, >= 0 values) in order.
absl::StatusOr<std::vector<std::pair<std::string, float>>> ParseTableValues(
    const char* flag, const std::string& text) {
  std::vector<std::pair<std::string, float>> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    double value = 0;
    const std::string name(absl::StripAsciiWhitespace(kv.first));
    if (name.empty() || !absl::SimpleAtod(kv.second, &value) || !std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, ": expected NAME=VALUE with a finite VALUE >= 0, got '", item, "'"));
    }
    out.emplace_back(name, static_cast<float>(value));
  }
  return out;
}

}  // namespace

absl::Status TakeRegularizationFlags(WorkerOptions* o) {
  TrainOptions& t = o->train;
  ModelOptions& m = t.model;
  PS_ASSIGN_OR_RETURN(m.table_weight_decay,
                      ParseTableValues("--table_weight_decay", absl::GetFlag(FLAGS_table_weight_decay)));
  const std::string bias_init = absl::GetFlag(FLAGS_bias_init);
  if (bias_init != "uniform" && bias_init != "zeros") {
    return absl::InvalidArgumentError(
        absl::StrCat("--bias_init=", bias_init, ": want uniform or zeros"));
  }
  m.uniform_biases = bias_init == "uniform";
  absl::StatusOr<EmbeddingInitSpec> init = ParseEmbeddingInit(absl::GetFlag(FLAGS_embedding_init));
  if (!init.ok()) return Annotate(init.status(), "--embedding_init");
  m.embedding_init = *init;
  m.table_init.clear();
  for (absl::string_view item : absl::StrSplit(absl::GetFlag(FLAGS_table_init), ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string name(absl::StripAsciiWhitespace(kv.first));
    absl::StatusOr<EmbeddingInitSpec> spec = ParseEmbeddingInit(absl::StripAsciiWhitespace(kv.second));
    if (name.empty() || !spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--table_init: expected NAME=INIT, got '", item, "'",
          spec.ok() ? "" : absl::StrCat(" (", spec.status().message(), ")")));
    }
    m.table_init.emplace_back(name, *spec);
  }
  m.dropout = static_cast<float>(absl::GetFlag(FLAGS_dropout));
  PS_RETURN_IF_ERROR(Annotate(CheckDropout(m.graph != nullptr ? "graph" : m.name, m.dropout), "--dropout"));
  t.lr_decay_steps = absl::GetFlag(FLAGS_lr_decay_steps);
  t.lr_decay_start = absl::GetFlag(FLAGS_lr_decay_start);
  t.lr_decay_end = static_cast<float>(absl::GetFlag(FLAGS_lr_decay_end));
  if (t.lr_decay_steps < 0 || t.lr_decay_start < 0) {
    return absl::InvalidArgumentError("--lr_decay_steps and --lr_decay_start must be >= 0");
  }
  if (!(t.lr_decay_end >= 0.0f && t.lr_decay_end <= 1.0f)) {
    return absl::InvalidArgumentError("--lr_decay_end must be in [0, 1]");
  }
  if (o->mode == TrainMode::kPipeline &&
      (m.dropout > 0 || !m.table_weight_decay.empty() || t.lr_decay_steps > 0)) {
    return absl::InvalidArgumentError(
        "--dropout, --table_weight_decay and --lr_decay_steps are not built for --mode=pipeline");
  }
  const std::string untrained = absl::GetFlag(FLAGS_untrained_rows);
  if (untrained != "zeros" && untrained != "init") {
    return absl::InvalidArgumentError(
        absl::StrCat("--untrained_rows=", untrained, ": want zeros or init"));
  }
  t.zero_untrained = untrained == "zeros" && o->mode != TrainMode::kPipeline;
  if (!m.table_weight_decay.empty() || !m.table_init.empty()) {
    // The names are the model's tables': build it (tables only, on the CPU)
    // so that a misspelled name fails before a cluster starts.
    ModelOptions probe = m;
    probe.device = "cpu";
    absl::StatusOr<std::unique_ptr<Model>> model = CreateModel(probe);
    if (!model.ok()) return model.status();
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
