// Model: the compute of one CTR model replica, separated from where its
// parameters live. The trainer asks the model which tables it has, plans a
// batch (unique ids per sparse table), fetches those parameters (from the
// parameter servers or a local store), and runs one step with them. The
// model never talks to the network. Not thread-safe: one trainer thread per
// Model instance (it keeps scratch buffers between steps).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "data/batch.h"
#include "data/schema.h"
#include "model/graph/model_graph.h"
#include "model/models/embedding_init.h"

namespace pstrain::worker {

// The ids one sparse table needs for one batch.
struct SparseLookup {
  std::vector<uint64_t> unique_ids;  // each id once; the rows to fetch
  // For every id occurrence the table serves, in the batch's CSR order (the
  // fields this table serves, in order; within a field, row by row), its
  // position in unique_ids.
  std::vector<uint32_t> index;
};

// What Plan() derives from a batch. Reused across steps (no reallocation).
struct BatchPlan {
  std::vector<SparseLookup> lookups;  // one per sparse table, by sparse order
};

// Parameter values bound for one step, indexed by TableSpec::id.
// Dense table: `size` floats. Sparse table: unique_ids.size() x dim floats,
// row i holding the row of plan.lookups[k].unique_ids[i].
struct ParamRefs {
  std::vector<const float*> tables;
};

// Gradient outputs, indexed like ParamRefs, same shapes. The model
// overwrites every element. Gradients are of the SUM of per-sample losses
// over the batch (not the mean): the optimizer scales by 1/num_samples.
struct GradRefs {
  std::vector<float*> tables;
  // Optional. Called on the TrainStep thread once for every dense table, as
  // soon as its gradient is final (during the backward pass, last layers
  // first), so that the caller can start communicating it while the rest of
  // the backward pass runs (gradient bucketing with overlap).
  std::function<void(uint32_t table)> on_ready;
};

// One output of a model: a logit trained against one of the batch's labels.
struct ModelHead {
  std::string name = "click";
  int label = 0;            // the batch's label it learns (LabelOf): 0 the first
  bool regression = false;  // squared error of the logit itself; else sigmoid + BCE
  float weight = 1.0f;      // its loss's weight in the step's sum
  // ESMM (Ma et al. 2018): an earlier probability head this one is
  // conditioned on (-1: none). Its probability is sigmoid(its logit) times
  // that head's, learned on every row that has that head's label: where
  // that label is 0 its own is 0 (no conversion without a click), else its
  // own label. So a conversion head learns pCVR through pCTCVR = pCTR x
  // pCVR over all rows, not only the clicked ones.
  int times = -1;
};

// Head h's label of row r (NaN: none, the row is masked out of its loss and
// metrics), by ModelHead::times' rule.
inline float HeadLabelOf(const Batch& b, const std::vector<ModelHead>& heads, size_t h, int r) {
  const ModelHead& head = heads[h];
  if (head.times < 0) return LabelOf(b, head.label, r);
  const float given = LabelOf(b, heads[head.times].label, r);
  if (given != given) return given;  // NaN
  return given == 0.0f ? 0.0f : LabelOf(b, head.label, r);
}

struct StepOutput {
  // Sum of per-sample losses (binary cross-entropy; with several heads,
  // their weighted sum over the rows that have each head's label).
  double loss_sum = 0;
  int num_samples = 0;
  // With several heads: each head's unweighted loss sum and the rows that
  // had its label, by head; else empty.
  std::vector<double> head_loss_sum;
  std::vector<int64_t> head_rows;
  // Each row's predicted probability (the first head's), from the forward
  // pass before the step's update (progressive validation); only with
  // ModelOptions::step_probs, else empty.
  std::vector<float> probs;
  // With several heads and step_probs: every head's output, [rows x heads]
  // (a probability, or a regression head's value); else empty.
  std::vector<float> head_probs;
};

struct ModelOptions {
  std::string name = "dlrm";  // lr | wide_deep | dlrm | deep_tower | dcn_v2 | deepfm
  int num_dense = 13;
  int num_sparse = 26;
  int embedding_dim = 16;
  // The pooling of each sparse field's bag, [num_sparse]; empty: all sum.
  std::vector<BagPooling> pooling;
  // The embedding width of each sparse field, [num_sparse]; empty (or 0):
  // embedding_dim. wide_deep, deep_tower and dcn_v2 concatenate fields of
  // any widths; dlrm's dot interaction and deepfm's FM need them all equal.
  std::vector<int> field_dims;
  // The name of each sparse field, [num_sparse]: the schema's column names,
  // which name its tables ("emb.carrier"); empty: C1..Cn (the Criteo layout's).
  std::vector<std::string> field_names;
  // The field whose ids each sparse field takes, [num_sparse] (the schema's
  // ids_like; -1: its own); empty: every field its own. A model file's
  // network gives such fields one table.
  std::vector<int> field_ids_of;
  // The schema's labels by name (LabelNames: the first label, then its
  // "labels"), which a model file's heads name; empty: one, "label".
  std::vector<std::string> label_names;
  // The hash buckets of each sparse field, [num_sparse] (0: unbounded ids);
  // empty: every field unbounded. U(+-sqrt(1/rows)) starts a table by them.
  std::vector<uint64_t> field_rows;
  // How embedding rows start (--embedding_init); a model file's
  // embedding_init and table_init override it.
  EmbeddingInitSpec embedding_init = DefaultEmbeddingInit();
  std::vector<int> bottom_mlp = {64, 16};    // dlrm: last width == embedding_dim
  std::vector<int> top_mlp = {64, 32};       // a final width-1 layer is added
  std::vector<int> deep_mlp = {256, 128};    // wide_deep, deepfm deep tower
  int cross_layers = 3;                      // dcn_v2: cross layers
  int cross_rank = 64;                       // dcn_v2: their rank (0: full rank)
  OptimizerConfig dense_optimizer;           // for dense tables
  OptimizerConfig sparse_optimizer;          // for embedding / sparse tables
  uint64_t seed = 1;                         // initializer seed
  // MLP biases start as PyTorch's nn.Linear's, U(+-1/sqrt(fan_in)); false:
  // zeros (DCN-v2's cross layers always start at zero).
  bool uniform_biases = true;
  // Dropout on the hidden layers of the towers (dlrm's and dcn_v2's top MLP,
  // wide_deep's and deepfm's deep MLP) while training; 0: off. Each worker
  // draws its own masks: dropout_stream tells them apart (the rank).
  float dropout = 0.0f;
  uint64_t dropout_stream = 0;
  // L2 weight decay per table: (a table name, or a prefix ending in '*',
  // value), overriding the optimizer's weight_decay for the tables it names;
  // the last matching entry wins. Every entry must match a table.
  std::vector<std::pair<std::string, float>> table_weight_decay;
  // Embedding initializers per table (--table_init): (a table name, or a
  // prefix ending in '*', its start), over the model file's and
  // embedding_init; the last matching entry wins. Every entry must match.
  std::vector<std::pair<std::string, EmbeddingInitSpec>> table_init;
  // The network of a model file (--model_file); null: the built-in network
  // `name` with the shape above. With a graph, `name` only names it.
  std::shared_ptr<const graph::ModelGraph> graph;
  std::string device = "cpu";                // cpu | cuda
  bool step_probs = false;                   // TrainStep fills StepOutput::probs
};

// The embedding width of sparse field `field`.
inline int FieldDim(const ModelOptions& options, int field) {
  return static_cast<size_t>(field) < options.field_dims.size() && options.field_dims[field] > 0
             ? options.field_dims[field]
             : options.embedding_dim;
}

// Where each field's embedding starts in [emb_1 | ... | emb_F], and (last,
// [num_sparse]) their total width.
inline std::vector<int> FieldOffsets(const ModelOptions& options) {
  std::vector<int> offsets(options.num_sparse + 1, 0);
  for (int f = 0; f < options.num_sparse; ++f) offsets[f + 1] = offsets[f] + FieldDim(options, f);
  return offsets;
}

class Model {
 public:
  virtual ~Model() = default;

  // All tables, TableSpec::id == position. Stable for the model's lifetime.
  virtual const std::vector<TableSpec>& tables() const = 0;
  // Positions (TableSpec::id) of the sparse tables, in BatchPlan order.
  virtual const std::vector<uint32_t>& sparse_tables() const = 0;
  // The sparse fields each sparse table serves (BatchPlan order): a table's
  // index holds its fields' ids one field after the other.
  virtual const std::vector<std::vector<int>>& sparse_fields() const = 0;

  // Deduplicates the batch's ids per sparse table into `plan`.
  virtual void Plan(const Batch& batch, BatchPlan* plan) const = 0;

  // Forward + backward. REQUIRES: `params`/`grads` bound as documented.
  virtual absl::StatusOr<StepOutput> TrainStep(const Batch& batch, const BatchPlan& plan,
                                               const ParamRefs& params, GradRefs* grads) = 0;

  // Its outputs: one for the built-in networks, a model file's heads.
  virtual const std::vector<ModelHead>& heads() const = 0;

  // Forward only: each row's output of every head into `probs`, [B x
  // heads().size()] row-major: a probability (a regression head's value).
  virtual absl::Status Predict(const Batch& batch, const BatchPlan& plan,
                               const ParamRefs& params, std::span<float> probs) = 0;
};

// The model's columns from `schema`: num_dense, num_sparse, each sparse
// field's pooling, name, ids_of and width (its embedding_dim, or
// options.embedding_dim), and the label names.
void SetSchemaColumns(const Schema& schema, ModelOptions* options);

// Builds the model named in options.name. InvalidArgument for unknown names
// or inconsistent shapes; Unavailable for device=cuda without a GPU/CUDA build.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelOptions& options);
// OK when `name` is a model CreateModel makes; InvalidArgument listing them.
absl::Status CheckModelName(const std::string& name);
// OK when model `model` takes dropout `rate` (ModelOptions::dropout).
absl::Status CheckDropout(const std::string& model, float rate);

}  // namespace pstrain::worker
