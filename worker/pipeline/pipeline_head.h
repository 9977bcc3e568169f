// PipelineHead: stage 0's part of a model before the tower: it turns a
// micro-batch's rows (dense features and embedding bags) into the tower's
// input, and back-propagates the tower input's gradient into the embedding
// rows and the head's own dense tables. Activations needed by the backward
// pass live in a HeadActivations per micro-batch in flight. Not thread-safe:
// one stage thread.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "model/nn/device.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

// One micro-batch's rows of a step's batch, as views.
struct HeadInputs {
  nn::ConstMatrixView dense;   // [rows x num_dense]
  std::vector<nn::Bags> bags;  // per sparse table (BatchPlan order), rows bags each
};

// Per micro-batch state of a head; subclasses add their buffers.
struct HeadActivations {
  virtual ~HeadActivations() = default;
};

class PipelineHead {
 public:
  virtual ~PipelineHead() = default;

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
  // `accumulate` adds to, the gradients of the head's dense tables.
  virtual absl::Status Backward(nn::Device& device, const HeadInputs& in,
                                const std::vector<const float*>& params,
                                const HeadActivations& acts, nn::MatrixView d_out,
                                const std::vector<float*>& grads, bool accumulate) = 0;
};

// The head of options.name (dlrm, deep_tower, dcn_v2) over `model`'s tables.
// InvalidArgument for other models or tables that do not match.
absl::StatusOr<std::unique_ptr<PipelineHead>> CreatePipelineHead(const ModelOptions& options,
                                                                 const Model& model);

}  // namespace pstrain::worker
