#include "worker/pipeline/pipeline_model.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
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

std::vector<int> WithLogit(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

}  // namespace

absl::Status CheckPipelineModel(const std::string& name) {
  if (name == "dlrm" || name == "deep_tower" || name == "dcn_v2") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "pipeline mode needs a model made of a head and a tower of layers (dlrm, deep_tower, "
      "dcn_v2), not '",
      name, "'",
      name == "deepfm" || name == "wide_deep" ? ": its logit adds a sparse linear part to the "
                                                "tower's output"
                                              : ""));
}

absl::StatusOr<PipelineModelSpec> DescribePipelineModel(const ModelOptions& options,
                                                        const Model& model, int batch_rows) {
  PipelineModelSpec spec;
  spec.name = options.name;
  const int fields = options.num_sparse;
  const int dim = options.embedding_dim;
  const int embedding_width = FieldOffsets(options).back();
  const double embedding_cost = 3.0 * batch_rows * embedding_width;
  if (options.name == "dlrm") {
    const int vectors = fields + 1;
    PS_ASSIGN_OR_RETURN(spec.tower,
                        FindLinearLayers(model, "top", nn::InteractionOutputWidth(vectors, dim),
                                   WithLogit(options.top_mlp), false));
    PS_ASSIGN_OR_RETURN(auto bottom,
                        FindLinearLayers(model, "bottom", options.num_dense, options.bottom_mlp, true));
    spec.head_cost = embedding_cost + 6.0 * batch_rows * nn::InteractionPairs(vectors) * dim;
    for (const LinearSpec& l : bottom) spec.head_cost += LayerCost(l, batch_rows);
  } else if (options.name == "deep_tower") {
    PS_ASSIGN_OR_RETURN(spec.tower, FindLinearLayers(model, "tower", embedding_width + options.num_dense,
                                               WithLogit(options.deep_mlp), false));
    spec.head_cost = embedding_cost + 3.0 * batch_rows * options.num_dense;
  } else if (options.name == "dcn_v2") {
    const int width = options.bottom_mlp.back() + embedding_width;
    PS_ASSIGN_OR_RETURN(spec.tower,
                        FindLinearLayers(model, "top", width, WithLogit(options.top_mlp), false));
    PS_ASSIGN_OR_RETURN(auto bottom,
                        FindLinearLayers(model, "bottom", options.num_dense, options.bottom_mlp, true));
    const double rank = options.cross_rank > 0 ? 2.0 * options.cross_rank : width;
    spec.head_cost = embedding_cost + 6.0 * batch_rows * options.cross_layers * width * rank;
    for (const LinearSpec& l : bottom) spec.head_cost += LayerCost(l, batch_rows);
  } else {
    PS_RETURN_IF_ERROR(CheckPipelineModel(options.name));
    return absl::InvalidArgumentError(absl::StrCat("no pipeline layout for '", options.name, "'"));
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
