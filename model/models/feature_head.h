// FeatureHead: the part of a network below its top tower, as pipeline mode
// runs it on stage 0 while it cuts the tower into stages: it turns rows
// (dense features and embedding bags) into the tower's input, and
// back-propagates the tower input's gradient into the embedding rows and
// the head's own dense tables (DLRM's bottom MLP and dot interaction,
// DCN-v2's bottom MLP and cross layers, deep_tower's concatenation; their
// implementations: pipeline_heads.cc). The heads find their tables by name
// in the built-in network's graph model, so a stage pulls exactly what the
// unsplit network trains. Activations needed by the backward pass live in a
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
  std::vector<nn::Bags> bags;  // per sparse field (BatchPlan order), rows bags each
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

// The lower part DLRM's and DCN-v2's heads share: per row,
// x = [bottom(dense) | emb_1 | ... | emb_F], the bottom MLP's output first,
// then each field's pooled embedding at its offset.
class BottomAndEmbeddings {
 public:
  struct Activations {
    StackActivations bottom;
    nn::DeviceBuffer x;  // [rows x width()]
  };

  // `offset`: FieldOffsets() of the fields' widths (offset[f]..offset[f+1]
  // after the bottom's output). REQUIRES: bottom non-empty.
  BottomAndEmbeddings(std::vector<LinearSpec> bottom, std::vector<uint32_t> emb,
                      std::vector<int> offset, std::vector<nn::Pooling> pooling);

  int width() const { return bottom_width_ + offset_.back(); }
  std::vector<uint32_t> dense_tables() const { return bottom_.table_ids(); }

  // Writes x into acts->x (grown to in.dense.rows rows) and returns it.
  absl::StatusOr<nn::MatrixView> Forward(nn::Device& device, const HeadInputs& in,
                                         const std::vector<const float*>& params,
                                         Activations* acts) const;
  // Given dL/dx in `dx` (overwritten: scratch), adds the embedding rows'
  // gradients and writes (or adds to) the bottom MLP's.
  absl::Status Backward(nn::Device& device, const HeadInputs& in,
                        const std::vector<const float*>& params, const Activations& acts,
                        nn::MatrixView dx, const std::vector<float*>& grads, bool accumulate,
                        const std::function<void(uint32_t)>* ready);

 private:
  template <class View>
  View Block(View x, size_t f) const {
    return x.Columns(bottom_width_ + offset_[f], offset_[f + 1] - offset_[f]);
  }

  const int bottom_width_;
  LayerStack bottom_;
  const std::vector<uint32_t> emb_;
  const std::vector<int> offset_;
  const std::vector<nn::Pooling> pooling_;
};

// The bottom MLP ("bottom.<i>", ReLU after each) and the embedding tables
// of `model` for dlrm and dcn_v2.
absl::StatusOr<BottomAndEmbeddings> FindBottomAndEmbeddings(const ModelOptions& options,
                                                            const Model& model);

// The head of options.name (dlrm, deep_tower, dcn_v2) over `model`'s tables,
// found by name. InvalidArgument for other models or tables that do not
// match the options.
absl::StatusOr<std::unique_ptr<FeatureHead>> CreateFeatureHead(const ModelOptions& options,
                                                               const Model& model);

// How sparse field `field`'s bags are pooled (ModelOptions::pooling).
nn::Pooling FieldPooling(const ModelOptions& options, size_t field);

// The parts of a model, found by table name (the heads' factories, pipeline
// mode's tower):
// the id of table `name`; NotFound when the model has none.
absl::StatusOr<uint32_t> FindTable(const Model& model, const std::string& name);
// The embedding table of each sparse field, "emb.<its name>" of the field's
// width, at sparse position f.
absl::StatusOr<std::vector<uint32_t>> FindEmbeddingTables(const ModelOptions& options,
                                                          const Model& model);
// The Linear layers "<prefix>.<i>.weight/bias" for `widths` from width `in`,
// ReLU after each but (unless relu_last) the last, checked against the
// tables' sizes.
absl::StatusOr<std::vector<LinearSpec>> FindLinearLayers(const Model& model,
                                                         const std::string& prefix, int in,
                                                         const std::vector<int>& widths,
                                                         bool relu_last);

}  // namespace pstrain::worker
