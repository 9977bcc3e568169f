#include "model/graph/graph_head.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/graph/graph_model.h"
#include "model/graph/graph_model_impl.h"
#include "model/models/built_in_graphs.h"
#include "model/nn/cpu_device.h"

namespace pstrain::worker {

absl::Status GraphModel::HeadForward(const HeadInputs& in, const std::vector<const float*>& params,
                                     int tower, nn::MatrixView out) {
  StepData& step = head_step_;
  step.batch = in.dense.rows;
  step.dense = in.dense;
  step.params = params;
  step.grads.clear();  // a forward: no dropout (FindGraphTower refuses it)
  step.bags = in.bags;
  step.bag_begin = in.bag_begin;
  PS_RETURN_IF_ERROR(Reserve(step.batch));
  dense_ = step.dense;
  PS_RETURN_IF_ERROR(EmbeddingsForward(step));
  for (int i : r_.order) {
    if (i != tower) PS_RETURN_IF_ERROR(LayerForward(step, i));
  }
  PS_RETURN_IF_ERROR(PackInputs(tower, step.batch));
  return device().CopyMatrix(Input(tower, step.batch), out);
}

absl::Status GraphModel::HeadBackward(const HeadInputs& in, const std::vector<const float*>& params,
                                      const std::vector<float*>& grads, bool accumulate,
                                      const std::function<void(uint32_t)>* ready, int tower,
                                      nn::MatrixView d_out) {
  StepData& step = head_step_;
  const int rows = in.dense.rows;
  if (step.batch != rows) return absl::InternalError("graph head: backward of other rows");
  step.params = params;
  step.grads = grads;
  step.grad_ready = ready;
  dense_ = in.dense;
  // dL/d(the tower's input) goes where the tower's backward would write it.
  const Node& n = nodes_[tower];
  if (n.need_dx) {
    const int t0 = r_.layer_inputs[tower][0];
    const nn::MatrixView dx = n.packs || places_[t0].summed
                                  ? nn::MatrixView(n.dx.as(), rows, r_.InputWidth(tower))
                                  : Grad(t0, rows);
    PS_RETURN_IF_ERROR(device().CopyMatrix(d_out, dx));
    PS_RETURN_IF_ERROR(HandInputGrads(tower, dx, rows));
  }
  for (size_t k = r_.order.size(); k-- > 0;) {
    if (r_.order[k] != tower) PS_RETURN_IF_ERROR(LayerBackward(step, r_.order[k], accumulate));
  }
  PS_RETURN_IF_ERROR(FinishSummedGrads(rows));
  PS_RETURN_IF_ERROR(EmbeddingsBackward(step));
  step.grad_ready = nullptr;
  return absl::OkStatus();
}

namespace {

// The head: a graph model per micro-batch in flight (each keeps its own
// activations), all over the same tables.
class GraphHead final : public FeatureHead {
 public:
  struct Acts : HeadActivations {
    std::unique_ptr<GraphModel> model;
  };

  GraphHead(ModelOptions options, graph::ResolvedGraph resolved, GraphTower tower,
            std::vector<uint32_t> dense_tables)
      : options_(std::move(options)),
        resolved_(std::move(resolved)),
        tower_(std::move(tower)),
        dense_tables_(std::move(dense_tables)) {}

  int out_width() const override { return tower_.in; }
  std::vector<uint32_t> dense_tables() const override { return dense_tables_; }
  std::unique_ptr<HeadActivations> NewActivations() const override {
    auto acts = std::make_unique<Acts>();
    acts->model = std::make_unique<GraphModel>(options_, nn::CreateCpuDevice(), resolved_);
    return acts;
  }

  absl::Status Forward(nn::Device& device, const HeadInputs& in,
                       const std::vector<const float*>& params, HeadActivations* acts,
                       nn::MatrixView out) override {
    if (!device.host_memory()) return absl::UnimplementedError("pipeline mode computes on the CPU");
    return static_cast<Acts*>(acts)->model->HeadForward(in, params, tower_.layer, out);
  }
  absl::Status Backward(nn::Device& device, const HeadInputs& in,
                        const std::vector<const float*>& params, const HeadActivations& acts,
                        nn::MatrixView d_out, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready) override {
    if (!device.host_memory()) return absl::UnimplementedError("pipeline mode computes on the CPU");
    return static_cast<const Acts&>(acts).model->HeadBackward(in, params, grads, accumulate, ready,
                                                              tower_.layer, d_out);
  }

 private:
  const ModelOptions options_;
  const graph::ResolvedGraph resolved_;
  const GraphTower tower_;
  const std::vector<uint32_t> dense_tables_;
};

}  // namespace

absl::StatusOr<graph::ModelGraph> NetworkGraph(const ModelOptions& options) {
  if (options.graph != nullptr) return *options.graph;
  return BuiltInGraph(options);
}

absl::StatusOr<GraphTower> FindGraphTower(const ModelOptions& options) {
  PS_ASSIGN_OR_RETURN(const ModelOptions o, WithNetworkGraph(options));
  const graph::ModelGraph& g = *o.graph;
  PS_ASSIGN_OR_RETURN(graph::ResolvedGraph r, graph::ResolveGraph(g, GraphInputsOf(o)));
  const std::string refused = absl::StrCat(
      "pipeline mode needs a model made of a head and a tower of layers (an mlp feeding its "
      "one head, as dlrm, deep_tower and dcn_v2 are), not '", options.name, "': ");
  const std::string where = options.graph != nullptr ? absl::StrCat(g.file, ":") : "";
  if (g.heads.size() != 1 || g.heads[0].regression) {
    const graph::HeadSpec& h = g.heads[g.heads.size() > 1 ? 1 : 0];
    return absl::InvalidArgumentError(absl::StrCat(
        refused, where, h.line, ": head \"", h.name, "\"",
        g.heads.size() > 1 ? " is a second head" : " is a regression head"));
  }
  const int layer = r.tensors[r.head_tensor[0]].layer;
  const graph::LayerSpec& l = g.layers[layer];
  const std::string at = absl::StrCat(where, where.empty() ? "" : absl::StrCat(l.line, ": "));
  if (l.type != graph::LayerType::kMlp && l.type != graph::LayerType::kLinear) {
    return absl::InvalidArgumentError(absl::StrCat(refused, at, "layer \"", l.name, "\" (",
                                                   graph::LayerTypeName(l.type),
                                                   ") feeds head \"", g.heads[0].name, "\""));
  }
  for (const graph::LayerSpec& x : g.layers) {
    const float rate = x.dropout >= 0 ? x.dropout : (x.tower ? o.dropout : 0.0f);
    if (x.type == graph::LayerType::kMlp && rate > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, where.empty() ? "" : absl::StrCat(x.line, ": "), "layer \"", x.name,
          "\": dropout (", rate, x.dropout >= 0 ? "" : ", --dropout",
          ") is not built for pipeline mode"));
    }
  }
  GraphTower t;
  t.layer = layer;
  t.name = l.name;
  t.in = r.InputWidth(layer);
  t.widths = l.type == graph::LayerType::kLinear ? std::vector<int>{l.width} : l.widths;
  t.relu_last = l.type == graph::LayerType::kMlp && l.relu_last;
  return t;
}

absl::StatusOr<std::unique_ptr<FeatureHead>> CreateGraphFeatureHead(const ModelOptions& options,
                                                                    const Model& model) {
  PS_ASSIGN_OR_RETURN(const ModelOptions o, WithNetworkGraph(options));
  PS_ASSIGN_OR_RETURN(GraphTower tower, FindGraphTower(o));
  PS_ASSIGN_OR_RETURN(graph::ResolvedGraph r, graph::ResolveGraph(*o.graph, GraphInputsOf(o)));
  // The head's dense tables: every dense table but the tower's.
  const std::string prefix = tower.name + ".";
  std::vector<uint32_t> dense;
  for (const TableSpec& t : model.tables()) {
    if (t.kind == TableKind::kDense && t.name.rfind(prefix, 0) != 0) dense.push_back(t.id);
  }
  auto head = std::make_unique<GraphHead>(o, std::move(r), std::move(tower), std::move(dense));
  // Its graph model declares the same tables as `model`.
  std::unique_ptr<HeadActivations> probe = head->NewActivations();
  const GraphModel& built = *static_cast<GraphHead::Acts&>(*probe).model;
  if (built.tables().size() != model.tables().size()) {
    return absl::InternalError("the pipeline head's graph declares other tables than the model");
  }
  for (size_t i = 0; i < model.tables().size(); ++i) {
    if (built.tables()[i].name != model.tables()[i].name) {
      return absl::InternalError(absl::StrCat("the pipeline head's table ", i, " is ",
                                              built.tables()[i].name, ", the model's ",
                                              model.tables()[i].name));
    }
  }
  return std::unique_ptr<FeatureHead>(std::move(head));
}

}  // namespace pstrain::worker
