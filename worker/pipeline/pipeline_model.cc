#include "worker/pipeline/pipeline_model.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "model/graph/graph_head.h"
#include "model/nn/interaction.h"

namespace pstrain::worker {
namespace {

// Moving a parameter costs a pull and a push of 4 bytes each step; at a few
// GB/s against tens of GFLOP/s that is worth about this many FLOPs.
constexpr double kParamCost = 200;

double LayerCost(const LinearSpec& l, int rows) {
  const double weights = static_cast<double>(l.in) * l.out;
  return 6.0 * weights * rows + kParamCost * (weights + l.out);
}

}  // namespace

absl::Status CheckPipelineModel(const ModelOptions& options) {
  return FindGraphTower(options).status();
}

absl::StatusOr<PipelineModelSpec> DescribePipelineModel(const ModelOptions& options,
                                                        const Model& model, int batch_rows) {
  PipelineModelSpec spec;
  spec.name = options.name;
  PS_ASSIGN_OR_RETURN(const GraphTower tower, FindGraphTower(options));
  PS_ASSIGN_OR_RETURN(spec.tower, FindLinearLayers(model, tower.name, tower.in, tower.widths,
                                                   tower.relu_last));
  PS_ASSIGN_OR_RETURN(const graph::ModelGraph g, NetworkGraph(options));
  // The head's cost: gathering the embeddings, and each layer below the
  // tower by its kind (an MLP's Linear layers as the tower's; the dot
  // interaction's and the cross layers' products; the others by their
  // parameters).
  spec.head_cost = 3.0 * batch_rows * FieldOffsets(options).back();
  for (size_t i = 0; i < g.layers.size(); ++i) {
    const graph::LayerSpec& l = g.layers[i];
    if (static_cast<int>(i) == tower.layer) continue;
    const std::string prefix = l.name + ".";
    double params = 0;
    for (const TableSpec& t : model.tables()) {
      if (t.kind == TableKind::kDense && t.name.rfind(prefix, 0) == 0) params += t.size;
    }
    switch (l.type) {
      case graph::LayerType::kMlp:
      case graph::LayerType::kLinear: {
        const std::vector<int> widths = l.type == graph::LayerType::kLinear
                                            ? std::vector<int>{l.width} : l.widths;
        // Its input's width: its first weight is [widths[0] x in].
        int in = 0;
        for (const TableSpec& t : model.tables()) {
          if (t.name == l.name + ".0.weight") in = static_cast<int>(t.size / widths[0]);
        }
        PS_ASSIGN_OR_RETURN(std::vector<LinearSpec> layers,
                            FindLinearLayers(model, l.name, in, widths, l.relu_last));
        for (const LinearSpec& x : layers) spec.head_cost += LayerCost(x, batch_rows);
        break;
      }
      case graph::LayerType::kDotInteraction: {
        int vectors = 0;
        for (const std::string& x : l.inputs) vectors += x == "embeddings" ? options.num_sparse : 1;
        spec.head_cost += 6.0 * batch_rows * nn::InteractionPairs(vectors) * options.embedding_dim;
        break;
      }
      default:
        spec.head_cost += 6.0 * batch_rows * params;
        break;
    }
  }
  for (const LinearSpec& l : spec.tower) spec.layer_cost.push_back(LayerCost(l, batch_rows));
  return spec;
}

namespace {

absl::StatusOr<StagePartition> ParseRanges(const std::string& text, int layers, int stages) {
  StagePartition p;
  p.first.push_back(0);
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    if (ends.size() > 2 || !absl::SimpleAtoi(ends[0], &lo) || !absl::SimpleAtoi(ends.back(), &hi)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--stage_layers: '", part, "' is not a layer range like 0-5 (in '", text, "')"));
    }
    if (lo != p.first.back() || hi < lo) {
      return absl::InvalidArgumentError(
          absl::StrCat("--stage_layers: range '", part, "' should start at layer ", p.first.back(),
                       " and not end before it (ranges cover the tower in order)"));
    }
    p.first.push_back(hi + 1);
  }
  if (p.stages() != stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage_layers gives ", p.stages(), " ranges for ", stages, " stages"));
  }
  if (p.first.back() != layers) {
    return absl::InvalidArgumentError(absl::StrCat("--stage_layers covers layers 0-",
                                                   p.first.back() - 1, " but the tower has ",
                                                   layers, " layers (0-", layers - 1, ")"));
  }
  return p;
}

}  // namespace

absl::StatusOr<StagePartition> PartitionTower(const PipelineModelSpec& spec, int stages,
                                              const std::string& explicit_ranges) {
  const int n = static_cast<int>(spec.tower.size());
  if (stages < 1) return absl::InvalidArgumentError("need at least one stage");
  if (stages > n) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.name, " has ", n, " tower layers: it cannot be cut into ", stages,
                     " stages (each stage needs at least one layer)"));
  }
  if (!explicit_ranges.empty()) return ParseRanges(explicit_ranges, n, stages);
  // prefix[i] = cost of layers [0, i) (+ the head on stage 0).
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + spec.layer_cost[i];
  auto cost = [&](int a, int b) { return prefix[b] - prefix[a] + (a == 0 ? spec.head_cost : 0); };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[k][j]: the smallest max stage cost of layers [0, j) on k stages.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInf));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int j = k; j <= n; ++j) {
      for (int i = k - 1; i < j; ++i) {
        double c = std::max(best[k - 1][i], cost(i, j));
        if (c < best[k][j]) {
          best[k][j] = c;
          cut[k][j] = i;
        }
      }
    }
  }
  StagePartition p;
  p.first.assign(stages + 1, n);
  for (int k = stages, j = n; k > 0; --k) {
    j = cut[k][j];
    p.first[k - 1] = j;
  }
  return p;
}

std::string DescribePartition(const PipelineModelSpec& spec, const StagePartition& partition) {
  double total = spec.head_cost;
  for (double c : spec.layer_cost) total += c;
  std::vector<std::string> parts;
  for (int k = 0; k < partition.stages(); ++k) {
    double c = k == 0 ? spec.head_cost : 0;
    for (int i = partition.begin(k); i < partition.end(k); ++i) c += spec.layer_cost[i];
    parts.push_back(absl::StrFormat("stage %d: %slayers %d-%d (%.0f%% of the cost)", k,
                                    k == 0 ? "head + " : "", partition.begin(k),
                                    partition.end(k) - 1, total > 0 ? 100 * c / total : 0));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace pstrain::worker
