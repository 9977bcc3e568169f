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

ABSL_FLAG(std::string, model_graph, "",
          "A model file's contents inline (JSON): what a job file's \"model\": {\"graph\": "
          "{...}} sets, so that one job file holds the network too. --model_file names a file "
          "instead.");

namespace pstrain::worker {

absl::Status TakeModelFileFlag(WorkerOptions* o) {
  const std::string path = absl::GetFlag(FLAGS_model_file);
  const std::string inline_graph = absl::GetFlag(FLAGS_model_graph);
  if (path.empty() && inline_graph.empty()) return absl::OkStatus();
  if (!path.empty() && !inline_graph.empty()) {
    return absl::InvalidArgumentError(
        "--model_file and --model_graph (a job's model.file and model.graph) both describe the "
        "network: give one");
  }
  ModelOptions& m = o->train.model;
  absl::StatusOr<graph::ModelGraph> g =
      path.empty() ? graph::ParseModelGraph(inline_graph, "the job's model.graph")
                   : graph::ReadModelGraph(path);
  if (!g.ok()) return Annotate(g.status(), path.empty() ? "--model_graph" : "--model_file");
  m.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
  m.name = !m.graph->name.empty() ? m.graph->name
           : path.empty()          ? "model_graph"
                                   : std::filesystem::path(path).stem().string();
  if (m.graph->embedding_dim > 0) m.embedding_dim = m.graph->embedding_dim;
  return absl::OkStatus();
}

absl::Status CheckModelGraph(const WorkerOptions& o) {
  const ModelOptions& m = o.train.model;
  if (m.graph == nullptr) return absl::OkStatus();
  return Annotate(graph::ResolveGraph(*m.graph, GraphInputsOf(m)).status(),
                  absl::GetFlag(FLAGS_model_file).empty() ? "--model_graph" : "--model_file");
}

}  // namespace pstrain::worker
