// GraphModel: the class of the graph model (graph_model.h), shared by
// graph_model.cc (its tables and places, every layer's forward and
// backward) and graph_head.cc (pipeline mode's cut: the graph below its
// tower). Internal to model/graph.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/graph/mixture_of_experts.h"
#include "model/graph/model_graph.h"
#include "model/graph/self_attention.h"
#include "model/graph/target_attention.h"
#include "model/models/cross_net.h"
#include "model/models/feature_head.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"
#include "model/models/table_registry.h"

namespace pstrain::worker {

// How the rows of table `table` (sparse field f's) start: its table_init,
// else the graph's embedding_init, else --embedding_init. InvalidArgument
// when that cannot start it (U(+-sqrt(1/rows)) on unbounded ids).
absl::StatusOr<InitializerConfig> TableRowInit(const ModelOptions& o, const std::string& table,
                                               int f);

class GraphModel final : public ModelBase {
 public:
  GraphModel(const ModelOptions& options, std::unique_ptr<nn::Device> device,
             graph::ResolvedGraph r);

  // Pipeline mode's cut (graph_head.cc): every layer but `tower` (the mlp
  // feeding the only head) on `in`'s rows, and `out` = the tower's input;
  // then its backward from dL/d(that input) (`d_out`, overwritten), adding
  // to the embedding rows' gradients and writing (or adding to) the dense
  // tables' of those layers. Host memory.
  absl::Status HeadForward(const HeadInputs& in, const std::vector<const float*>& params,
                           int tower, nn::MatrixView out);
  absl::Status HeadBackward(const HeadInputs& in, const std::vector<const float*>& params,
                            const std::vector<float*>& grads, bool accumulate,
                            const std::function<void(uint32_t)>* ready, int tower,
                            nn::MatrixView d_out);
  const graph::ResolvedGraph& resolved() const { return r_; }

 private:
  // Where a tensor lives for the rows being computed.
  struct Place {
    int home = -1;       // the layer whose input block holds it (-1: a buffer of its own)
    int column = 0;      // its first column there
    bool needs_grad = false;
    bool summed = false;  // read by several layers: its gradient is their parts' sum
    // Summed, and its home is its last reader: the home's backward runs
    // first and writes its part in its block of dx, where the others add
    // theirs (else a buffer of its own sums them).
    bool grad_at_home = false;
    nn::DeviceBuffer value, grad;  // own buffers (home < 0; grad: a summed one not at home)
  };
  struct Node {
    std::unique_ptr<Mlp> mlp;
    std::unique_ptr<CrossNet> cross;
    CrossNet::Activations cross_acts;
    std::unique_ptr<TargetAttention> attention;
    std::unique_ptr<SelfAttention> self_attention;
    std::unique_ptr<Experts> experts;
    std::unique_ptr<ExpertGate> gate;
    // wide: its linear part's tables (-1: none) and each column's table and
    // sparse position.
    int wide_weight = -1, wide_bias = -1;
    std::vector<uint32_t> wide_tables;
    std::vector<int> wide_positions;
    float dropout = 0.0f;
    bool packs = false;    // its input is its inputs side by side in x
    bool need_dx = false;  // an input wants its gradient
    nn::DeviceBuffer x, dx;  // packed input and its gradient; dx: scratch otherwise
  };

  absl::Status Reserve(int batch) override;
  absl::Status Forward(const StepData& step, nn::MatrixView logits) override;
  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits, nn::MatrixView dlogits,
                        bool accumulate) override;

  // Views of tensor t (value and gradient) for `rows` rows.
  nn::MatrixView Value(int t, int rows) const;
  nn::MatrixView Grad(int t, int rows) const;
  nn::ConstMatrixView Input(int layer, int rows) const;
  absl::Status LayerForward(const StepData& step, int i);
  absl::Status LayerBackward(const StepData& step, int i, bool accumulate);
  // Layer i's inputs side by side in its x, where it packs them.
  absl::Status PackInputs(int i, int rows);
  // Hands each input of layer i its block of dx (its packed input's
  // gradient) unless it lives there.
  absl::Status HandInputGrads(int i, nn::MatrixView dx, int rows);
  // Every categorical column's pooled embedding that a layer reads, and the
  // backward into the tables' rows.
  absl::Status EmbeddingsForward(const StepData& step);
  absl::Status EmbeddingsBackward(const StepData& step);
  // dL/d(tensor t) += src: written by its first part, added by the others
  // when several layers read t (grad_written_).
  absl::Status AddToGrad(int t, nn::ConstMatrixView src, int rows);
  // After the layers' backward: zeroes a summed gradient no layer wrote
  // and readies grad_written_ for the next.
  absl::Status FinishSummedGrads(int rows);

  const ModelOptions& o() const { return options(); }
  // The bags of sparse field f.
  const nn::Bags& Bag(const StepData& step, int f) const {
    return step.Bag(bag_of_[f].first, bag_of_[f].second);
  }

  graph::ResolvedGraph r_;
  std::vector<graph::LayerSpec> specs_;
  std::vector<Node> nodes_;
  std::vector<Place> places_;
  std::vector<uint32_t> emb_table_;  // by field
  std::vector<std::pair<int, int>> bag_of_;  // by field: (sparse position, slot) of its bags
  std::vector<int> head_of_;         // by tensor: the head whose logit it is, or -1
  int reserved_ = 0;
  std::vector<char> grad_written_;  // by tensor: its summed gradient written this backward
  // The head's step (HeadForward, HeadBackward).
  StepData head_step_;
  // The step's bindings for the rows being computed.
  nn::ConstMatrixView dense_;
  nn::MatrixView logits_, dlogits_;
};

}  // namespace pstrain::worker
