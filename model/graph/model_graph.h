// ModelGraph: a network described in a model file (--model_file): named
// layers over named inputs, in the spirit of HugeCTR's layer graph.
//
//   {
//     // DLRM (JSON with comments)
//     "embedding_dim": 16,
//     "layers": [
//       {"name": "bottom", "type": "mlp", "input": "dense", "widths": [64, 16], "relu_last": true},
//       {"name": "interaction", "type": "dot_interaction", "inputs": ["bottom", "embeddings"]},
//       {"name": "top", "type": "mlp", "input": "interaction", "widths": [64, 32, 1], "tower": true}
//     ],
//     "heads": [{"name": "click", "input": "top"}]
//   }
//
// Inputs a layer may name: "dense" (the schema's dense columns), a
// categorical column's name (its pooled embedding, table "emb.<column>";
// a column whose ids are another's, the schema's "ids_like", looks up that
// one's table), and "embeddings" (every categorical column's, in the
// schema's order). A target_attention layer reads a column's ids as a
// sequence ("sequence": a multi-hot column, a behaviour history) against its
// input (the target, e.g. the candidate item's embedding).
// ReadModelGraph checks the file alone (keys, types, names, cycles);
// ResolveGraph checks it against the job's columns (widths) and gives every
// tensor's shape. Errors name the file, its line, the layer and the key.
// Plain data; copy freely.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/models/embedding_init.h"

namespace pstrain::worker::graph {

// The widest tensor a graph may have (and the widest mlp layer).
inline constexpr int kMaxGraphWidth = 1 << 16;

enum class LayerType {
  kMlp,             // Linear layers, ReLU after each (the last too with relu_last)
  kLinear,          // one Linear layer without activation: "width" outputs (1: a logit)
  kConcat,          // its inputs side by side
  kDotInteraction,  // DLRM's: [first input | <v_i, v_j> for i < j], inputs of one width
  kCross,           // DCN-v2's cross layers over its input (low rank with "rank")
  kFm,              // the factorization machine's second-order term (1 column), inputs of one width
  kTargetAttention, // DIN: a sequence column's items weighted by an MLP's score against its input
  kSelfAttention,   // BST: one self-attention layer over a sequence column, mean of its outputs
  kWide,            // a weight per id of each column, summed (+ a linear layer over its input)
  kAdd,             // its inputs summed, of one width
  kExperts,         // MMoE's/PLE's experts: "count" MLPs over one input, side by side
  kGate,            // a task's gate: softmax(linear(input)) mixing the experts of "experts" layers
  kPool,            // a sequence column's items summed or averaged ("pooling")
};
absl::string_view LayerTypeName(LayerType t);

struct LayerSpec {
  std::string name;
  LayerType type = LayerType::kMlp;
  std::vector<std::string> inputs;  // as written ("embeddings" not yet expanded)
  std::vector<int> widths;          // mlp
  bool relu_last = false;           // mlp
  bool tower = false;               // mlp: the job's --dropout applies to its hidden layers
  bool he_init = false;             // mlp: "init": "he" for its hidden layers' weights
  float dropout = -1;               // mlp: the rate on its hidden layers (-1: see tower)
  int width = 1;                    // linear
  int layers = 3;                   // cross
  int rank = 0;                     // cross: 0 = full rank
  std::string sequence;             // target_attention, self_attention: the column of the items
  int heads = 1;                    // self_attention
  int max_length = 50;              // self_attention: positions learned
  int feed_forward = 0;             // self_attention: the feed-forward block's width (0: none)
  bool layer_norm = false;          // self_attention: layer norm after each residual
  std::vector<std::string> columns; // wide: its columns (empty: every categorical column)
  bool bias = false;                // wide: a bias
  bool mean_pool = false;           // pool: "pooling": "mean" (else "sum")
  int count = 0;                    // experts: how many
  std::vector<std::string> experts; // gate: the experts layers it mixes
  int line = 0;                     // in the file, for messages
};

struct HeadSpec {
  std::string name;
  std::string input;  // a tensor of width 1: the logit
  std::string label;  // the schema's label it learns ("": the first label)
  bool regression = false;  // "loss": "mse" (the logit is the prediction); else "bce"
  float weight = 1.0f;      // its loss's weight in the step's sum
  // "times": an earlier probability head this one is conditioned on (ESMM:
  // its probability is sigmoid(its logit) x that head's; model.h's
  // ModelHead::times has the label rule). "" for none.
  std::string times;
  int line = 0;
};

struct ModelGraph {
  std::string file;        // where it was read from, for messages
  std::string name;        // its "name" ("" when it has none)
  int embedding_dim = 0;   // the tables' width, as --embedding_dim (0: the job's)
  // How the embedding rows start ("embedding_init": "zeros",
  // {"uniform": SCALE}, {"normal": SCALE}, {"uniform": "1/sqrt(dim)"} or
  // {"uniform": "sqrt(1/rows)"}); unset: the job's --embedding_init.
  std::optional<worker::EmbeddingInitSpec> embedding_init;
  // "table_init": {"emb.item": {"normal": 0.01}, ...}: one embedding
  // table's start, over embedding_init's.
  struct TableInit {
    std::string table;
    worker::EmbeddingInitSpec init;
    int line = 0;
  };
  std::vector<TableInit> table_init;
  std::vector<LayerSpec> layers;  // in the file's order
  std::vector<HeadSpec> heads;
  std::string text;        // the file as read (saved with exported models)
};

// Parses a model file's text; `name` is its file name for messages.
absl::StatusOr<ModelGraph> ParseModelGraph(absl::string_view text, const std::string& name);
// Reads and parses a model file.
absl::StatusOr<ModelGraph> ReadModelGraph(const std::string& path);

// The tensors a graph sees from the job.
struct GraphInputs {
  int num_dense = 0;
  std::vector<std::string> columns;  // categorical columns, in the batch's field order
  std::vector<int> dims;             // their embedding widths
  std::vector<int> ids_of;           // the field whose ids (and table) each takes; -1: its own
  // The schema's labels, by name (LabelNames); empty: one, "label".
  std::vector<std::string> labels;
};

// A tensor: an input or a layer's output.
struct Tensor {
  enum class Kind { kDense, kEmbedding, kLayer };
  std::string name;
  Kind kind = Kind::kLayer;
  int width = 0;
  int field = -1;                 // kEmbedding: the categorical column's field
  int layer = -1;                 // kLayer: index in ModelGraph::layers
  std::vector<int> consumers;     // layers reading it
  bool head = false;              // a head's logit
};

// A graph checked against its inputs: every tensor with its width, each
// layer's expanded input tensors, the layers in an order that computes each
// before its readers.
struct ResolvedGraph {
  std::vector<Tensor> tensors;                   // inputs first, then the layers' outputs
  std::vector<std::vector<int>> layer_inputs;    // by layer: tensor ids
  std::vector<int> layer_output;                 // by layer: its tensor id
  std::vector<int> order;                        // layer indices, inputs before readers
  std::vector<int> head_tensor;                  // by head
  std::vector<int> head_label;                   // by head: its label (GraphInputs::labels)
  // by layer: a gate's selector tensors (the first of layer_inputs; the
  // rest are its experts layers' outputs); 0 for other layers.
  std::vector<int> layer_gate_inputs;
  std::vector<int> layer_sequence;               // by layer: the sequence's field, or -1
  std::vector<std::vector<int>> layer_columns;   // by layer: a wide layer's fields
  // Width of each layer's input (the sum of its inputs').
  int InputWidth(int layer) const;
};

// Checks widths and use: an input or layer no head depends on, a tensor
// of the wrong width for its reader, a head that is not one column wide.
absl::StatusOr<ResolvedGraph> ResolveGraph(const ModelGraph& graph, const GraphInputs& in);

}  // namespace pstrain::worker::graph
