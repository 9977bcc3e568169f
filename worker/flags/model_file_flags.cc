// --model_file: the network as a model file (model/graph/model_graph.h)
// instead of a built-in one named by --model.
#include <filesystem>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/graph/graph_model.h"
#include "model/graph/model_graph.h"
#include "worker/flags/worker_flags.h"

ABSL_FLAG(std::string, model_file, "",
          "A model file (JSON with comments): the network as a graph of named layers over the "
          "schema's columns, trained on the schema's label (docs/model-file.md; examples/models/ "
          "has the built-in networks written as files). Replaces --model and its shape flags "
          "(--bottom_mlp, --top_mlp, --deep_mlp, --cross_*); ps and allreduce modes.");

namespace pstrain::worker {

absl::Status TakeModelFileFlag(WorkerOptions* o) {
  const std::string path = absl::GetFlag(FLAGS_model_file);
  if (path.empty()) return absl::OkStatus();
  ModelOptions& m = o->train.model;
  if (o->mode == TrainMode::kPipeline) {
    return absl::InvalidArgumentError(
        "--model_file with --mode=pipeline: pipeline mode cuts the built-in networks into stages "
        "(--model); a model file runs in ps and allreduce modes");
  }
  absl::StatusOr<graph::ModelGraph> g = graph::ReadModelGraph(path);
  if (!g.ok()) return Annotate(g.status(), "--model_file");
  m.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
  m.name = m.graph->name.empty() ? std::filesystem::path(path).stem().string() : m.graph->name;
  if (m.graph->embedding_dim > 0) m.embedding_dim = m.graph->embedding_dim;
  return absl::OkStatus();
}

}  // namespace pstrain::worker
