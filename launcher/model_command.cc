// pstrain model inspect DIR: what an exported model (--save_model,
// --export_every_steps/_secs, or each version of an --export_dir) holds, with every table file's checksum
// verified: the version `pstrain serve` reports, the step, the schema's
// columns and each table's rows and bytes.
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status.h"
#include "job/job_fields.h"
#include "launcher/args.h"
#include "launcher/command.h"
#include "launcher/commands.h"
#include "launcher/job_args.h"
#include "launcher/job_check.h"
#include "model/graph/graph_model.h"
#include "model/graph/model_graph.h"
#include "model/models/built_in_graphs.h"
#include "model/models/model.h"
#include "model/models/table_registry.h"
#include "serve/model_io.h"
#include "serve/model_versions.h"

namespace pstrain::launcher {
namespace graph = worker::graph;
namespace {

absl::Status InspectVersions(const std::string& dir);

absl::Status Inspect(const std::string& dir) {
  if (worker::IsVersionedExport(dir)) return InspectVersions(dir);
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

std::string UtcTime(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

// A versioned export folder: every version from the oldest base kept to
// LATEST, each read whole (checksums verified), then LATEST's model as
// `pstrain serve` builds it.
absl::Status InspectVersions(const std::string& dir) {
  PS_ASSIGN_OR_RETURN(uint64_t latest, worker::ReadLatest(dir));
  std::vector<uint64_t> seqs;
  for (uint64_t s = latest; s >= 1; --s) {
    absl::StatusOr<worker::ExportInfo> info = worker::ReadVersionInfo(dir, s);
    if (!info.ok()) {
      if (s == latest) return info.status();
      break;  // pruned (or never written) below here
    }
    seqs.insert(seqs.begin(), s);
  }
  std::printf("export folder %s: %zu versions kept (%s to %s), LATEST %s\n", dir.c_str(),
              seqs.size(), worker::VersionName(seqs.front()).c_str(),
              worker::VersionName(seqs.back()).c_str(), worker::VersionName(latest).c_str());
  std::printf("  %-10s %-6s %-10s %10s %12s %10s %14s  %s\n", "version", "kind", "base", "step",
              "rows", "removed", "bytes", "exported");
  bool complete_chain = false;
  for (uint64_t s : seqs) {
    absl::StatusOr<worker::SavedModel> v = worker::ReadVersion(dir, s);
    if (!v.ok()) {
      return absl::DataLossError(absl::StrCat(worker::VersionName(s), " is not whole: ",
                                              v.status().message()));
    }
    uint64_t rows = 0, removed = 0, bytes = 0;
    for (const worker::TableValues& t : v->tables) {
      rows += t.ids.size();
      removed += t.removed.size();
      bytes += t.ids.size() * 8 + t.rows.size() * 4 + t.dense.size() * 4 + t.removed.size() * 8;
    }
    if (!v->exported.delta) complete_chain = true;
    std::printf("  %-10s %-6s %-10s %10lld %12llu %10llu %14llu  %s\n",
                worker::VersionName(s).c_str(), v->exported.delta ? "delta" : "base",
                worker::VersionName(v->exported.base).c_str(), static_cast<long long>(v->step),
                static_cast<unsigned long long>(rows), static_cast<unsigned long long>(removed),
                static_cast<unsigned long long>(bytes), UtcTime(v->exported.exported_unix_ms).c_str());
  }
  if (!complete_chain) {
    return absl::DataLossError(absl::StrCat(dir, ": no base is kept below ",
                                            worker::VersionName(latest)));
  }
  PS_ASSIGN_OR_RETURN(worker::SavedModel model, worker::ReadVersionedModel(dir, latest));
  uint64_t rows = 0;
  for (const worker::TableValues& t : model.tables) rows += t.ids.size();
  std::printf("  %s as served: model %s, step %lld, %llu embedding rows; all checksums verified\n",
              worker::VersionName(latest).c_str(), model.model.name.c_str(),
              static_cast<long long>(model.step), static_cast<unsigned long long>(rows));
  return absl::OkStatus();
}

// pstrain model show FILE|NAME [job flags]: a model file's graph (or the
// built-in network NAME's, of the job's shape flags) over the job's columns,
// every tensor's width and every table, as the workers build it.
absl::Status Show(const std::string& file, const std::vector<std::string>& rest) {
  absl::StatusOr<std::vector<Arg>> args = ParseArgs(rest);
  if (!args.ok()) return UsageError(args.status().message());
  PS_ASSIGN_OR_RETURN(LauncherJob job, ExpandJob(*args));
  for (const Arg& a : job.args) {
    std::string value;
    if (JobFieldOf(a, &value) == nullptr) {
      std::vector<std::string> known;
      for (const job::JobField& f : job::JobFields()) known.emplace_back(f.flag);
      return UsageError(absl::StrCat("unknown flag --", a.name, DidYouMean(a.name, known)));
    }
  }
  // A built-in network's name (when no such file is here) shows its graph.
  const bool built_in = worker::CheckModelName(file).ok() && !std::filesystem::exists(file);
  job.spec.Set(*job::FieldOfFlag(built_in ? "model" : "model_file"), file, job::Source::kFlag,
               built_in ? "NAME" : "FILE");
  if (job.spec.Find("train_data") == nullptr) {
    job.spec.Set(*job::FieldOfFlag("train_data"), "(none)", job::Source::kDefault, "");
  }
  PS_ASSIGN_OR_RETURN(CheckedJob checked, CheckJob(job.spec, {}));
  worker::ModelOptions m = checked.worker.train.model;
  m.device = "cpu";
  if (built_in) {
    absl::StatusOr<worker::ModelOptions> network = worker::WithNetworkGraph(m);
    if (!network.ok()) return UsageError(network.status().message());
    m = *std::move(network);
  }
  absl::StatusOr<graph::ResolvedGraph> r = graph::ResolveGraph(*m.graph, worker::GraphInputsOf(m));
  if (!r.ok()) return UsageError(r.status().message());
  absl::StatusOr<std::unique_ptr<worker::Model>> model = worker::CreateModel(m);
  if (!model.ok()) return UsageError(model.status().message());
  const graph::ModelGraph& g = *m.graph;
  std::printf("model %s (%s): %zu layers, %zu head%s, over %d dense and %d categorical columns\n\n",
              m.name.c_str(), (built_in ? "built in, --model=" + file : file).c_str(),
              g.layers.size(), g.heads.size(),
              g.heads.size() == 1 ? "" : "s", m.num_dense, m.num_sparse);
  std::printf("%-16s %-28s %-40s %s\n", "tensor", "what", "inputs", "width");
  for (const graph::Tensor& t : r->tensors) {
    if (t.layer >= 0) continue;
    if (t.kind == graph::Tensor::Kind::kDense) {
      std::printf("%-16s %-28s %-40s %d\n", t.name.c_str(), "input",
                  absl::StrCat(t.width, " dense columns").c_str(), t.width);
    } else {
      const std::string pooling = m.pooling.empty() || m.pooling[t.field] == worker::BagPooling::kSum ? "sum" : "mean";
      // A column taking another's ids (ids_like) looks up that one's table.
      const int owner = static_cast<size_t>(t.field) < m.field_ids_of.size() && m.field_ids_of[t.field] >= 0
                            ? m.field_ids_of[t.field]
                            : t.field;
      std::printf("%-16s %-28s %-40s %d\n", t.name.c_str(), ("embedding, " + pooling).c_str(),
                  absl::StrCat("table emb.", worker::SparseFieldName(m, owner)).c_str(), t.width);
    }
  }
  for (int i : r->order) {
    const graph::LayerSpec& l = g.layers[i];
    std::string what(graph::LayerTypeName(l.type));
    if (l.type == graph::LayerType::kMlp) absl::StrAppend(&what, " ", absl::StrJoin(l.widths, ","));
    if (l.type == graph::LayerType::kSelfAttention) {
      absl::StrAppend(&what, " over ", l.sequence, l.inputs.empty() ? "" : " + target", ", ",
                      l.heads, l.heads == 1 ? " head" : " heads");
    }
    if (l.type == graph::LayerType::kTargetAttention) {
      absl::StrAppend(&what, " ", absl::StrJoin(l.widths, ","), " over ", l.sequence);
    }
    if (l.type == graph::LayerType::kCross) {
      absl::StrAppend(&what, " x", l.layers, l.rank > 0 ? absl::StrCat(" rank ", l.rank) : " full");
    }
    if (l.type == graph::LayerType::kExperts) {
      absl::StrAppend(&what, " ", l.count, " x mlp ", absl::StrJoin(l.widths, ","));
    }
    if (l.type == graph::LayerType::kGate) absl::StrAppend(&what, " of ", absl::StrJoin(l.experts, ", "));
    if (l.type == graph::LayerType::kPool) {
      absl::StrAppend(&what, l.mean_pool ? " mean" : " sum", " over ", l.sequence);
    }
    std::string inputs = absl::StrJoin(l.inputs, ", ");
    if (l.type == graph::LayerType::kGate) {
      // The selector's tensors only: the experts are named beside the type.
      if (r->layer_gate_inputs[i] != static_cast<int>(l.inputs.size())) {
        absl::StrAppend(&inputs, " (", r->layer_gate_inputs[i], " tensors)");
      }
    } else if (r->layer_inputs[i].size() != l.inputs.size()) {
      absl::StrAppend(&inputs, " (", r->layer_inputs[i].size(), " tensors)");
    }
    std::printf("%-16s %-28s %-40s %d\n", l.name.c_str(), what.c_str(), inputs.c_str(),
                r->tensors[r->layer_output[i]].width);
  }
  const std::vector<std::string> labels = m.label_names.empty() ? std::vector<std::string>{"label"} : m.label_names;
  for (size_t k = 0; k < g.heads.size(); ++k) {
    const graph::HeadSpec& h = g.heads[k];
    std::string what = absl::StrCat(h.regression ? "value, squared error" : "sigmoid, logloss", " on ",
                                    labels[r->head_label[k]]);
    if (h.weight != 1.0f) absl::StrAppend(&what, " x", h.weight);
    if (!h.times.empty()) absl::StrAppend(&what, ", times ", h.times);
    std::printf("%-16s %-28s %-40s %d\n", ("head " + h.name).c_str(), what.c_str(), h.input.c_str(), 1);
  }
  uint64_t dense = 0;
  std::printf("\n%-24s %-8s %s\n", "table", "kind", "size");
  for (const TableSpec& t : (*model)->tables()) {
    if (t.kind == TableKind::kDense) {
      dense += t.size;
      std::printf("%-24s %-8s %" PRIu64 " floats\n", t.name.c_str(), "dense", t.size);
    } else {
      // How its rows start.
      const std::string init = t.init.kind == InitKind::kZeros     ? "zeros"
                               : t.init.kind == InitKind::kUniform ? absl::StrCat("U(+-", t.init.scale, ")")
                               : t.init.kind == InitKind::kNormal  ? absl::StrCat("N(0, ", t.init.scale, "^2)")
                                                                   : absl::StrCat("constant ", t.init.scale);
      std::printf("%-24s %-8s rows of %u floats, starting %s (grows with the ids seen)\n",
                  t.name.c_str(), "sparse", t.dim, init.c_str());
    }
  }
  std::printf("\n%" PRIu64 " dense parameters; %zu embedding tables\n", dense,
              (*model)->sparse_tables().size());
  return absl::OkStatus();
}

}  // namespace

std::string ModelHelp() {
  return "usage: pstrain model inspect DIR\n"
         "       pstrain model show FILE|NAME [--schema=F --train_data=FILES] [job flags]\n\n"
         "show: a model file's network (or the built-in network NAME's: lr, wide_deep, dlrm,\n"
         "deep_tower, dcn_v2, deepfm, shaped by --bottom_mlp, --top_mlp, --deep_mlp, --cross_layers,\n"
         "--cross_rank) over the job's columns (the Criteo layout, or --schema's):\n"
         "every tensor with its width, every layer's inputs, the heads, and the tables with\n"
         "their sizes, as the workers will build them. A wrong graph is one line naming the\n"
         "file, line, layer and key (exit 2). See docs/model-file.md.\n\n"
         "inspect:\n"
         "Lists an exported model's version (as `pstrain serve` reports it), step, export time,\n"
         "columns and tables (rows, bytes), verifying every table file's checksum. DIR is a\n"
         "--save_model folder, or an --export_dir folder: then every version kept (base or\n"
         "delta, step, rows, removed ids, bytes, export time) and the latest version as served\n"
         "(its base with the deltas after it applied). Exit code 1 when it is not a whole model\n"
         "(a file missing or corrupt, named).\n";
}

absl::Status RunModel(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[0] == "inspect") return Inspect(args[1]);
  if (args.size() >= 2 && args[0] == "show") {
    return Show(args[1], std::vector<std::string>(args.begin() + 2, args.end()));
  }
  return UsageError("expected `pstrain model inspect DIR` or `pstrain model show FILE` (see --help)");
}

}  // namespace pstrain::launcher
