#include "model/graph/graph_model.h"

#include "model/graph/graph_model_impl.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/graph/mixture_of_experts.h"
#include "model/graph/self_attention.h"
#include "model/graph/target_attention.h"
#include "model/models/cross_net.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"
#include "model/nn/interaction.h"

namespace pstrain::worker {
namespace {

using graph::LayerSpec;
using graph::LayerType;
using graph::ResolvedGraph;
using graph::Tensor;

}  // namespace

absl::StatusOr<InitializerConfig> TableRowInit(const ModelOptions& o, const std::string& table,
                                               int f) {
  const graph::ModelGraph& g = *o.graph;
  EmbeddingInitSpec spec = g.embedding_init.value_or(o.embedding_init);
  for (const graph::ModelGraph::TableInit& t : g.table_init) {
    if (t.table == table) spec = t.init;
  }
  for (const auto& [pattern, init] : o.table_init) {
    if (TableNameMatches(pattern, table)) spec = init;
  }
  const uint64_t rows = static_cast<size_t>(f) < o.field_rows.size() ? o.field_rows[f] : 0;
  return EmbeddingRowInit(spec, table, FieldDim(o, f), rows, o.seed);
}

GraphModel::GraphModel(const ModelOptions& options, std::unique_ptr<nn::Device> device,
                       ResolvedGraph r)
    : ModelBase(options, std::move(device)), r_(std::move(r)), specs_(options.graph->layers) {
  nodes_.resize(specs_.size());
  places_.resize(r_.tensors.size());
  int position = 0;  // the next sparse table's BatchPlan position
  // Tables: the layers', in the file's order, then the embeddings.
  for (size_t i = 0; i < specs_.size(); ++i) {
    const LayerSpec& l = specs_[i];
    Node& n = nodes_[i];
    const int in = r_.InputWidth(static_cast<int>(i));
    switch (l.type) {
      case LayerType::kMlp:
        n.dropout = l.dropout >= 0 ? l.dropout : (l.tower ? o().dropout : 0.0f);
        n.mlp = std::make_unique<Mlp>(&registry(), l.name, in, l.widths, l.relu_last, o().seed,
                                      /*dropout_hidden=*/n.dropout > 0.0f, l.he_init);
        break;
      case LayerType::kLinear:
        n.mlp = std::make_unique<Mlp>(&registry(), l.name, in, std::vector<int>{l.width},
                                      /*relu_last=*/false, o().seed);
        break;
      case LayerType::kCross:
        n.cross = std::make_unique<CrossNet>(&registry(), l.name, in, l.layers, l.rank, o().seed);
        break;
      case LayerType::kTargetAttention:
        n.attention = std::make_unique<TargetAttention>(&registry(), l.name, in, l.widths, o().seed);
        break;
      case LayerType::kWide:
        // As the built-in lr declares them: the linear part, then a 1-wide
        // zero-started row per id of each column.
        if (!r_.layer_inputs[i].empty()) {
          n.wide_weight = static_cast<int>(registry().AddDense(
              absl::StrCat(l.name, ".dense.weight"), in, ZeroInit(o().seed)));
        }
        if (l.bias) {
          n.wide_bias =
              static_cast<int>(registry().AddDense(absl::StrCat(l.name, ".bias"), 1, ZeroInit(o().seed)));
        }
        for (int f : r_.layer_columns[i]) {
          n.wide_tables.push_back(registry().AddSparse(
              absl::StrCat(l.name, ".", SparseFieldName(o(), f)), 1, ZeroInit(o().seed), {f}));
          n.wide_positions.push_back(position++);
        }
        break;
      case LayerType::kSelfAttention:
        n.self_attention = std::make_unique<SelfAttention>(
            &registry(), l.name, r_.tensors[r_.layer_output[i]].width, l.heads, l.max_length,
            l.feed_forward, l.layer_norm, o().seed);
        break;
      case LayerType::kExperts:
        n.experts = std::make_unique<Experts>(&registry(), l.name, in, l.count, l.widths, o().seed);
        break;
      case LayerType::kGate: {
        int gate_in = 0;
        for (int k = 0; k < r_.layer_gate_inputs[i]; ++k) gate_in += r_.tensors[r_.layer_inputs[i][k]].width;
        const int width = r_.tensors[r_.layer_output[i]].width;
        n.gate = std::make_unique<ExpertGate>(&registry(), l.name, gate_in, (in - gate_in) / width,
                                              width, o().seed);
        break;
      }
      default:
        break;
    }
    n.packs = (r_.layer_inputs[i].size() > 1 && l.type != LayerType::kAdd) ||
              l.type == LayerType::kConcat;
  }
  // One table per field, or per group of fields sharing ids (its first's).
  const std::vector<int>& ids_of = o().field_ids_of;
  const auto owner = [&ids_of](int f) {
    return static_cast<size_t>(f) < ids_of.size() && ids_of[f] >= 0 ? ids_of[f] : f;
  };
  emb_table_.assign(o().num_sparse, 0);
  bag_of_.assign(o().num_sparse, {0, 0});
  // A column's embedding table exists when its embedding is read, pooled or
  // as a sequence (a wide layer reads only its own rows).
  std::vector<char> needed(o().num_sparse, 0);
  for (const Tensor& t : r_.tensors) {
    if (t.kind == Tensor::Kind::kEmbedding && !t.consumers.empty()) needed[owner(t.field)] = 1;
  }
  for (int f : r_.layer_sequence) {
    if (f >= 0) needed[owner(f)] = 1;
  }
  for (int f = 0; f < o().num_sparse; ++f) {
    if (owner(f) != f || !needed[f]) continue;
    std::vector<int> fields;
    for (int g = 0; g < o().num_sparse; ++g) {
      if (owner(g) == f) {
        bag_of_[g] = {position, static_cast<int>(fields.size())};
        fields.push_back(g);
      }
    }
    const std::string name = absl::StrCat("emb.", SparseFieldName(o(), f));
    // CreateGraphModel checked that every table's initializer applies.
    const uint32_t table =
        registry().AddSparse(name, FieldDim(o(), f), *TableRowInit(o(), name, f), fields);
    for (int g : fields) emb_table_[g] = table;
    ++position;
  }
  // Which tensors need gradients: embeddings, and what a layer with tables
  // or such an input computes.
  for (Place& p : places_) p.needs_grad = false;
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    places_[t].needs_grad = r_.tensors[t].kind == Tensor::Kind::kEmbedding;
  }
  for (int i : r_.order) {
    bool any = specs_[i].type == LayerType::kMlp || specs_[i].type == LayerType::kLinear ||
               specs_[i].type == LayerType::kWide ||
               specs_[i].type == LayerType::kCross || specs_[i].type == LayerType::kTargetAttention ||
               specs_[i].type == LayerType::kSelfAttention ||
               specs_[i].type == LayerType::kExperts || specs_[i].type == LayerType::kGate ||
               specs_[i].type == LayerType::kPool;
    for (int t : r_.layer_inputs[i]) {
      any = any || places_[t].needs_grad;
      nodes_[i].need_dx = nodes_[i].need_dx || places_[t].needs_grad;
    }
    places_[r_.layer_output[i]].needs_grad = any;
  }
  // Homes: a tensor a packing layer reads (once) lives in its block; its
  // producer writes it there, so no copy packs it. Of several such readers
  // the one that runs last is preferred (its backward runs first: the
  // gradient's other parts add into its block of dx, as a built-in network
  // adds its FM's into its tower's), else the first (the others copy from
  // it; the gradient is summed in a buffer of its own).
  std::vector<int> rank(specs_.size(), 0);  // position in the forward order
  for (size_t k = 0; k < r_.order.size(); ++k) rank[r_.order[k]] = static_cast<int>(k);
  const auto can_home = [&](int t, int i) {
    const Tensor& x = r_.tensors[t];
    const std::vector<int>& ins = r_.layer_inputs[i];
    return nodes_[i].packs && std::count(ins.begin(), ins.end(), t) == 1 &&
           x.kind != Tensor::Kind::kDense && !x.head &&
           !(x.layer >= 0 && specs_[x.layer].type == LayerType::kConcat);
  };
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    const std::vector<int>& readers = r_.tensors[t].consumers;
    Place& p = places_[t];
    p.summed = readers.size() > 1;
    if (readers.empty()) continue;
    const int last = *std::max_element(readers.begin(), readers.end(),
                                       [&](int a, int b) { return rank[a] < rank[b]; });
    int home = can_home(static_cast<int>(t), last) ? last : -1;
    p.grad_at_home = p.summed && home >= 0;
    for (size_t i = 0; home < 0 && i < specs_.size(); ++i) {
      if (std::count(readers.begin(), readers.end(), static_cast<int>(i)) > 0 &&
          can_home(static_cast<int>(t), static_cast<int>(i))) {
        home = static_cast<int>(i);
      }
    }
    if (home < 0) continue;
    p.home = home;
    p.column = 0;
    for (int x : r_.layer_inputs[home]) {
      if (x == static_cast<int>(t)) break;
      p.column += r_.tensors[x].width;
    }
  }
  grad_written_.assign(r_.tensors.size(), 0);
  // The heads: their logits are the columns of the step's [rows x heads].
  head_of_.assign(r_.tensors.size(), -1);
  std::vector<ModelHead> heads;
  for (size_t h = 0; h < options.graph->heads.size(); ++h) {
    const graph::HeadSpec& spec = options.graph->heads[h];
    head_of_[r_.head_tensor[h]] = static_cast<int>(h);
    heads.push_back(ModelHead{spec.name, r_.head_label[h], spec.regression, spec.weight});
    for (size_t e = 0; e < h && !spec.times.empty(); ++e) {
      if (options.graph->heads[e].name == spec.times) heads.back().times = static_cast<int>(e);
    }
  }
  SetHeads(std::move(heads));
}

nn::MatrixView GraphModel::Value(int t, int rows) const {
  const Tensor& x = r_.tensors[t];
  const Place& p = places_[t];
  if (x.head) return logits_.Columns(head_of_[t], 1);
  if (p.home >= 0) {
    const Node& h = nodes_[p.home];
    return nn::MatrixView(h.x.as(), rows, r_.InputWidth(p.home)).Columns(p.column, x.width);
  }
  if (x.layer >= 0 && specs_[x.layer].type == LayerType::kConcat) {
    return nn::MatrixView(nodes_[x.layer].x.as(), rows, x.width);
  }
  return nn::MatrixView(p.value.as(), rows, x.width);
}

nn::MatrixView GraphModel::Grad(int t, int rows) const {
  const Tensor& x = r_.tensors[t];
  const Place& p = places_[t];
  if (!p.needs_grad) return nn::MatrixView();
  if (x.head) return dlogits_.Columns(head_of_[t], 1);
  // A summed gradient not at home has a buffer of its own: its home's
  // block of dx is the home layer's part of it.
  if (p.home >= 0 && (!p.summed || p.grad_at_home)) {
    const Node& h = nodes_[p.home];
    return nn::MatrixView(h.dx.as(), rows, r_.InputWidth(p.home)).Columns(p.column, x.width);
  }
  if (x.layer >= 0 && specs_[x.layer].type == LayerType::kConcat) {
    return nn::MatrixView(nodes_[x.layer].dx.as(), rows, x.width);
  }
  return nn::MatrixView(p.grad.as(), rows, x.width);
}

nn::ConstMatrixView GraphModel::Input(int i, int rows) const {
  if (r_.layer_inputs[i].empty()) return nn::ConstMatrixView();  // self_attention, pool
  if (nodes_[i].packs) return nn::ConstMatrixView(nodes_[i].x.as(), rows, r_.InputWidth(i));
  const int t = r_.layer_inputs[i][0];
  if (r_.tensors[t].kind == Tensor::Kind::kDense) return dense_;
  return Value(t, rows);
}

absl::Status GraphModel::Reserve(int batch) {
  if (batch <= reserved_) return absl::OkStatus();
  nn::Device* dev = &device();
  const size_t rows = static_cast<size_t>(batch);
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    const Tensor& x = r_.tensors[t];
    Place& p = places_[t];
    if (x.head || x.kind == Tensor::Kind::kDense ||
        (x.layer >= 0 && specs_[x.layer].type == LayerType::kConcat)) {
      continue;  // in the logits, the batch or the concat's block
    }
    if (p.home < 0) PS_RETURN_IF_ERROR(p.value.ReserveElements(dev, rows * x.width));
    if (p.needs_grad && (p.home < 0 || (p.summed && !p.grad_at_home))) {
      PS_RETURN_IF_ERROR(p.grad.ReserveElements(dev, rows * x.width));
    }
  }
  for (size_t i = 0; i < specs_.size(); ++i) {
    Node& n = nodes_[i];
    const size_t in = static_cast<size_t>(r_.InputWidth(static_cast<int>(i)));
    if (n.packs) PS_RETURN_IF_ERROR(n.x.ReserveElements(dev, rows * in));
    // dx: the packed input's gradient, or scratch for a summed input's.
    PS_RETURN_IF_ERROR(n.dx.ReserveElements(dev, rows * in));
    if (n.mlp) PS_RETURN_IF_ERROR(n.mlp->Reserve(dev, batch));
    if (n.experts) PS_RETURN_IF_ERROR(n.experts->Reserve(dev, batch));
  }
  reserved_ = batch;
  return absl::OkStatus();
}

absl::Status GraphModel::PackInputs(int i, int rows) {
  Node& n = nodes_[i];
  if (!n.packs) return absl::OkStatus();
  nn::MatrixView x(n.x.as(), rows, r_.InputWidth(i));
  int column = 0;
  for (int t : r_.layer_inputs[i]) {
    const int w = r_.tensors[t].width;
    if (places_[t].home != i) {
      nn::ConstMatrixView src =
          r_.tensors[t].kind == Tensor::Kind::kDense ? dense_ : nn::ConstMatrixView(Value(t, rows));
      PS_RETURN_IF_ERROR(device().CopyMatrix(src, x.Columns(column, w)));
    }
    column += w;
  }
  return absl::OkStatus();
}

absl::Status GraphModel::LayerForward(const StepData& step, int i) {
  nn::Device& dev = device();
  Node& n = nodes_[i];
  const int rows = step.batch;
  const std::vector<int>& ins = r_.layer_inputs[i];
  PS_RETURN_IF_ERROR(PackInputs(i, rows));
  const nn::ConstMatrixView x = Input(i, rows);
  const int out_t = r_.layer_output[i];
  nn::MatrixView out = Value(out_t, rows);
  const LayerSpec& l = specs_[i];
  switch (l.type) {
    case LayerType::kMlp:
    case LayerType::kLinear: {
      nn::DropoutRun run = step.dropout;
      run.rate = step.grads.empty() ? 0.0f : n.dropout;
      return n.mlp->Forward(dev, x, step.params, out, run);
    }
    case LayerType::kConcat:
      return absl::OkStatus();  // its output is its packed input
    case LayerType::kDotInteraction:
      return dev.DotInteractionForward(x, static_cast<int>(ins.size()), r_.tensors[ins[0]].width, out);
    case LayerType::kFm:
      return dev.FmForward(x, static_cast<int>(ins.size()), r_.tensors[ins[0]].width,
                           /*accumulate=*/false, out);
    case LayerType::kCross:
      return n.cross->Forward(dev, x, step.params, &n.cross_acts, out);
    case LayerType::kTargetAttention: {
      const int f = r_.layer_sequence[i];
      return n.attention->Forward(dev, step.params[emb_table_[f]], Bag(step, f), x, step.params, out);
    }
    case LayerType::kSelfAttention: {
      const int f = r_.layer_sequence[i];
      return n.self_attention->Forward(dev, step.params[emb_table_[f]], Bag(step, f), x,
                                       step.params, out);
    }
    case LayerType::kWide: {
      // The linear part (or the bias alone) first, then each column's rows.
      bool written = false;
      if (n.wide_weight >= 0 || n.wide_bias >= 0) {
        const nn::ConstMatrixView lin = n.wide_weight >= 0 ? x : nn::ConstMatrixView(dense_.data, rows, 0, 0);
        PS_RETURN_IF_ERROR(dev.LinearForward(
            lin, n.wide_weight >= 0 ? step.params[n.wide_weight] : nullptr,
            n.wide_bias >= 0 ? step.params[n.wide_bias] : nullptr, nn::Activation::kNone, out));
        written = true;
      }
      for (size_t c = 0; c < n.wide_tables.size(); ++c) {
        const int f = r_.layer_columns[i][c];
        PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[n.wide_tables[c]],
                                                   step.Bag(n.wide_positions[c]), FieldPooling(f),
                                                   /*accumulate=*/written, out));
        written = true;
      }
      return absl::OkStatus();
    }
    case LayerType::kPool: {
      const int f = r_.layer_sequence[i];
      return dev.EmbeddingBagForward(step.params[emb_table_[f]], Bag(step, f),
                                     l.mean_pool ? nn::Pooling::kMean : nn::Pooling::kSum,
                                     /*accumulate=*/false, out);
    }
    case LayerType::kExperts:
      return n.experts->Forward(dev, x, step.params, out);
    case LayerType::kGate:
      return n.gate->Forward(dev, x, step.params, out);
    case LayerType::kAdd: {
      PS_RETURN_IF_ERROR(dev.CopyMatrix(Value(ins[0], rows), out));
      for (size_t k = 1; k < ins.size(); ++k) PS_RETURN_IF_ERROR(dev.AddMatrix(Value(ins[k], rows), out));
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown layer type");
}

absl::Status GraphModel::EmbeddingsForward(const StepData& step) {
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    const Tensor& x = r_.tensors[t];
    if (x.kind != Tensor::Kind::kEmbedding || x.consumers.empty()) continue;
    PS_RETURN_IF_ERROR(device().EmbeddingBagForward(
        step.params[emb_table_[x.field]], Bag(step, x.field), FieldPooling(x.field),
        /*accumulate=*/false, Value(static_cast<int>(t), step.batch)));
  }
  return absl::OkStatus();
}

absl::Status GraphModel::Forward(const StepData& step, nn::MatrixView logits) {
  dense_ = step.dense;
  logits_ = logits;
  PS_RETURN_IF_ERROR(EmbeddingsForward(step));
  for (int i : r_.order) PS_RETURN_IF_ERROR(LayerForward(step, i));
  return absl::OkStatus();
}

absl::Status GraphModel::LayerBackward(const StepData& step, int i, bool accumulate) {
  nn::Device& dev = device();
  Node& n = nodes_[i];
  const int rows = step.batch;
  const std::vector<int>& ins = r_.layer_inputs[i];
  const int out_t = r_.layer_output[i];
  const nn::ConstMatrixView x = Input(i, rows);
  // dx: the packed input's gradient; for one input, that input's gradient
  // unless several layers sum into it (then scratch, added below).
  nn::MatrixView dx;
  if (n.need_dx) {
    const int t0 = ins[0];
    dx = n.packs || places_[t0].summed ? nn::MatrixView(n.dx.as(), rows, r_.InputWidth(i))
                                       : Grad(t0, rows);
  }
  const LayerSpec& l = specs_[i];
  nn::MatrixView d_out = Grad(out_t, rows);
  if (l.type == LayerType::kAdd) {
    // Each input's gradient is the output's.
    for (int t : ins) {
      if (places_[t].needs_grad) PS_RETURN_IF_ERROR(AddToGrad(t, d_out, rows));
    }
    return absl::OkStatus();
  }
  if (l.type == LayerType::kWide) {
    for (size_t c = 0; c < n.wide_tables.size(); ++c) {
      const int f = r_.layer_columns[i][c];
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(d_out, step.Bag(n.wide_positions[c]),
                                                  FieldPooling(f), step.grads[n.wide_tables[c]]));
    }
    if (n.wide_weight >= 0 || n.wide_bias >= 0) {
      const nn::ConstMatrixView lin = n.wide_weight >= 0 ? x : nn::ConstMatrixView(dense_.data, rows, 0, 0);
      PS_RETURN_IF_ERROR(dev.LinearBackward(
          lin, n.wide_weight >= 0 ? step.params[n.wide_weight] : nullptr, Value(out_t, rows),
          nn::Activation::kNone, d_out, n.wide_weight >= 0 ? step.grads[n.wide_weight] : nullptr,
          n.wide_bias >= 0 ? step.grads[n.wide_bias] : nullptr, n.wide_weight >= 0 ? dx : nn::MatrixView(),
          accumulate));
    }
  }
  switch (l.type) {
    case LayerType::kMlp:
    case LayerType::kLinear:
      PS_RETURN_IF_ERROR(n.mlp->Backward(dev, x, step.params, Value(out_t, rows), d_out, step.grads,
                                         dx, accumulate, step.grad_ready));
      break;
    case LayerType::kConcat:
    case LayerType::kWide:
    case LayerType::kAdd:
      break;  // dx is its output's gradient (concat), or written above
    case LayerType::kPool: {
      const int f = r_.layer_sequence[i];
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(d_out, Bag(step, f),
                                                  l.mean_pool ? nn::Pooling::kMean : nn::Pooling::kSum,
                                                  step.grads[emb_table_[f]]));
      break;
    }
    case LayerType::kExperts:
      PS_RETURN_IF_ERROR(n.experts->Backward(dev, x, step.params, Value(out_t, rows), d_out, step.grads,
                                             dx, accumulate, step.grad_ready));
      break;
    case LayerType::kGate:
      PS_RETURN_IF_ERROR(n.gate->Backward(dev, x, step.params, d_out, step.grads, dx, accumulate,
                                          step.grad_ready));
      break;
    case LayerType::kDotInteraction:
      if (dx.data != nullptr) {
        PS_RETURN_IF_ERROR(dev.DotInteractionBackward(x, d_out, static_cast<int>(ins.size()),
                                                      r_.tensors[ins[0]].width, dx));
      }
      break;
    case LayerType::kFm:
      if (dx.data != nullptr) {
        PS_RETURN_IF_ERROR(dev.FmBackward(x, d_out, static_cast<int>(ins.size()),
                                          r_.tensors[ins[0]].width, /*accumulate=*/false, dx));
      }
      break;
    case LayerType::kTargetAttention: {
      const int f = r_.layer_sequence[i];
      PS_RETURN_IF_ERROR(n.attention->Backward(dev, step.params[emb_table_[f]], Bag(step, f), x,
                                               step.params, d_out, step.grads[emb_table_[f]], dx,
                                               step.grads, accumulate, step.grad_ready));
      break;
    }
    case LayerType::kSelfAttention: {
      const int f = r_.layer_sequence[i];
      PS_RETURN_IF_ERROR(n.self_attention->Backward(dev, step.params[emb_table_[f]], Bag(step, f),
                                                    step.params, d_out, step.grads[emb_table_[f]],
                                                    dx, step.grads, accumulate, step.grad_ready));
      break;
    }
    case LayerType::kCross: {
      nn::MatrixView dx0 = dx.data != nullptr ? dx : nn::MatrixView(n.dx.as(), rows, r_.InputWidth(i));
      PS_RETURN_IF_ERROR(n.cross->Backward(dev, x, step.params, n.cross_acts, d_out, step.grads,
                                           dx0, accumulate, step.grad_ready));
      break;
    }
  }
  return HandInputGrads(i, dx, rows);
}

absl::Status GraphModel::HandInputGrads(int i, nn::MatrixView dx, int rows) {
  if (dx.data == nullptr) return absl::OkStatus();
  // Hand each input its block of dx unless it lives there or was written.
  int column = 0;
  for (int t : r_.layer_inputs[i]) {
    const int w = r_.tensors[t].width;
    const Place& p = places_[t];
    if (p.needs_grad && p.grad_at_home && p.home == i) {
      grad_written_[t] = 1;  // its part is in place; the other readers' add to it
    } else if (p.needs_grad && (p.summed || (p.home != i && nodes_[i].packs))) {
      PS_RETURN_IF_ERROR(AddToGrad(t, dx.Columns(column, w), rows));
    }
    column += w;
  }
  return absl::OkStatus();
}

absl::Status GraphModel::AddToGrad(int t, nn::ConstMatrixView src, int rows) {
  // A summed gradient's first part is copied (no zeroing pass), the others
  // added.
  const nn::MatrixView g = Grad(t, rows);
  if (!places_[t].summed) return device().CopyMatrix(src, g);
  if (grad_written_[t]) return device().AddMatrix(src, g);
  grad_written_[t] = 1;
  return device().CopyMatrix(src, g);
}

absl::Status GraphModel::FinishSummedGrads(int rows) {
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    if (places_[t].summed && places_[t].needs_grad && !grad_written_[t]) {
      const nn::MatrixView g = Grad(static_cast<int>(t), rows);
      PS_RETURN_IF_ERROR(device().Zero(g.data, sizeof(float) * static_cast<size_t>(rows) * g.cols));
    }
  }
  std::fill(grad_written_.begin(), grad_written_.end(), 0);
  return absl::OkStatus();
}

absl::Status GraphModel::EmbeddingsBackward(const StepData& step) {
  for (size_t t = 0; t < r_.tensors.size(); ++t) {
    const Tensor& x = r_.tensors[t];
    if (x.kind != Tensor::Kind::kEmbedding || x.consumers.empty()) continue;
    PS_RETURN_IF_ERROR(device().EmbeddingBagBackward(Grad(static_cast<int>(t), step.batch),
                                                     Bag(step, x.field), FieldPooling(x.field),
                                                     step.grads[emb_table_[x.field]]));
  }
  return absl::OkStatus();
}

absl::Status GraphModel::Backward(const StepData& step, nn::ConstMatrixView /*logits*/,
                                  nn::MatrixView dlogits, bool accumulate) {
  dlogits_ = dlogits;
  for (size_t k = r_.order.size(); k-- > 0;) {
    PS_RETURN_IF_ERROR(LayerBackward(step, r_.order[k], accumulate));
  }
  PS_RETURN_IF_ERROR(FinishSummedGrads(step.batch));
  return EmbeddingsBackward(step);
}

graph::GraphInputs GraphInputsOf(const ModelOptions& options) {
  graph::GraphInputs in;
  in.num_dense = options.num_dense;
  for (int f = 0; f < options.num_sparse; ++f) {
    in.columns.push_back(static_cast<size_t>(f) < options.field_names.size() &&
                                 !options.field_names[f].empty()
                             ? options.field_names[f]
                             : SparseFieldName(f));
    in.dims.push_back(FieldDim(options, f));
    in.ids_of.push_back(static_cast<size_t>(f) < options.field_ids_of.size() ? options.field_ids_of[f] : -1);
  }
  in.labels = options.label_names;
  return in;
}

absl::StatusOr<std::unique_ptr<Model>> CreateGraphModel(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device) {
  if (options.graph == nullptr) return absl::InvalidArgumentError("no model graph");
  PS_ASSIGN_OR_RETURN(ResolvedGraph r, graph::ResolveGraph(*options.graph, GraphInputsOf(options)));
  for (int f = 0; f < options.num_sparse; ++f) {
    const std::string table = absl::StrCat("emb.", SparseFieldName(options, f));
    PS_RETURN_IF_ERROR(TableRowInit(options, table, f).status());
  }
  return std::unique_ptr<Model>(new GraphModel(options, std::move(device), std::move(r)));
}

}  // namespace pstrain::worker
