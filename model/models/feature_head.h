// FeatureHead: the part of a network below its top tower, as pipeline mode
// runs it on stage 0 while it cuts the tower into stages: it turns rows
// (dense features and embedding bags) into the tower's input, and
// back-propagates the tower input's gradient into the embedding rows and
// the head's own dense tables. The one implementation is the network's
// graph below its tower (model/graph/graph_head.h), over the same tables
// as the unsplit model, so a stage pulls exactly what the unsplit network
// trains. Activations needed by the backward pass live in a
// HeadActivations per micro-batch in flight. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/nn/device.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/layer_stack.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

// Rows of a batch (or of one micro-batch), as views.
struct HeadInputs {
  nn::ConstMatrixView dense;   // [rows x num_dense]
  // Rows bags of each field a sparse table serves, table by table
  // (BatchPlan order; Model::sparse_fields), and where each table's start.
  std::vector<nn::Bags> bags;
  std::vector<uint32_t> bag_begin;
};

// Per micro-batch state of a head; subclasses add their buffers.
struct HeadActivations {
  virtual ~HeadActivations() = default;
};

class FeatureHead {
 public:
  virtual ~FeatureHead() = default;

  // Width of the tower input the head writes.
  virtual int out_width() const = 0;
  // The head's dense tables (e.g. DLRM's bottom MLP); the embedding tables
  // are the model's sparse tables.
  virtual std::vector<uint32_t> dense_tables() const = 0;
  virtual std::unique_ptr<HeadActivations> NewActivations() const = 0;

  // out ([rows x out_width()]) = head(in).
  virtual absl::Status Forward(nn::Device& device, const HeadInputs& in,
                               const std::vector<const float*>& params, HeadActivations* acts,
                               nn::MatrixView out) = 0;
  // Given dL/dout (overwritten: scratch), adds the embedding rows' gradients
  // (the caller zeroes them once per step) and overwrites, or with
  // `accumulate` adds to, the gradients of the head's dense tables;
  // `ready`, when set, is told each dense table whose gradient is final.
  virtual absl::Status Backward(nn::Device& device, const HeadInputs& in,
                                const std::vector<const float*>& params,
                                const HeadActivations& acts, nn::MatrixView d_out,
                                const std::vector<float*>& grads, bool accumulate,
                                const std::function<void(uint32_t)>* ready = nullptr) = 0;
};

// How sparse field `field`'s bags are pooled (ModelOptions::pooling).
nn::Pooling FieldPooling(const ModelOptions& options, size_t field);

// The parts of a model, found by table name (pipeline mode's tower):
// the id of table `name`; NotFound when the model has none.
absl::StatusOr<uint32_t> FindTable(const Model& model, const std::string& name);
// The Linear layers "<prefix>.<i>.weight/bias" for `widths` from width `in`,
// ReLU after each but (unless relu_last) the last, checked against the
// tables' sizes.
absl::StatusOr<std::vector<LinearSpec>> FindLinearLayers(const Model& model,
                                                         const std::string& prefix, int in,
                                                         const std::vector<int>& widths,
                                                         bool relu_last);

}  // namespace pstrain::worker
