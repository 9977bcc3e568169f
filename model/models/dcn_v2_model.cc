#include "model/models/dcn_v2_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/cross_net.h"
#include "model/models/mlp.h"
#include "model/models/model_base.h"

namespace pstrain::worker {
namespace {

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

class DcnV2Model final : public ModelBase {
 public:
  DcnV2Model(const ModelOptions& options, std::unique_ptr<nn::Device> device)
      : ModelBase(options, std::move(device)),
        bottom_width_(options.bottom_mlp.back()),
        offset_(FieldOffsets(options)),
        bottom_(&registry(), "bottom", options.num_dense, options.bottom_mlp,
                /*relu_last=*/true, options.seed),
        cross_(&registry(), "cross", bottom_width_ + offset_.back(), options.cross_layers,
               options.cross_rank, options.seed),
        top_(&registry(), "top", cross_.width(), WithLogitLayer(options.top_mlp),
             /*relu_last=*/false, options.seed, /*dropout_hidden=*/true) {
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

 private:
  int width() const { return cross_.width(); }
  // Field f's embedding block of x_0 = [bottom | emb_1 | ... | emb_F].
  nn::MatrixView Block(nn::MatrixView x, size_t f) const {
    return x.Columns(bottom_width_ + offset_[f], offset_[f + 1] - offset_[f]);
  }

  absl::Status Reserve(int batch) override {
    nn::Device* dev = &device();
    PS_RETURN_IF_ERROR(bottom_.Reserve(dev, batch));
    PS_RETURN_IF_ERROR(top_.Reserve(dev, batch));
    const size_t n = static_cast<size_t>(batch) * width();
    for (nn::DeviceBuffer* b : {&x0_, &dx0_, &xl_, &dxl_}) {
      PS_RETURN_IF_ERROR(b->ReserveElements(dev, n));
    }
    return absl::OkStatus();
  }

  absl::Status Forward(const StepData& step, nn::MatrixView logits) override {
    nn::Device& dev = device();
    const int rows = step.batch;
    nn::MatrixView x0(x0_.as(), rows, width());
    nn::MatrixView xl(xl_.as(), rows, width());
    PS_RETURN_IF_ERROR(
        bottom_.Forward(dev, step.dense, step.params, x0.Columns(0, bottom_width_)));
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagForward(step.params[sparse[f]], step.Bag(f),
                                                 FieldPooling(f), /*accumulate=*/false,
                                                 Block(x0, f)));
    }
    PS_RETURN_IF_ERROR(cross_.Forward(dev, x0, step.params, &acts_, xl));
    return top_.Forward(dev, xl, step.params, logits, step.dropout);
  }

  absl::Status Backward(const StepData& step, nn::ConstMatrixView logits,
                        nn::MatrixView dlogits, bool accumulate) override {
    nn::Device& dev = device();
    const int rows = step.batch;
    nn::MatrixView x0(x0_.as(), rows, width());
    nn::MatrixView xl(xl_.as(), rows, width());
    nn::MatrixView dx0(dx0_.as(), rows, width());
    nn::MatrixView dxl(dxl_.as(), rows, width());
    PS_RETURN_IF_ERROR(top_.Backward(dev, xl, step.params, logits, dlogits, step.grads, dxl,
                                     accumulate, step.grad_ready));
    PS_RETURN_IF_ERROR(cross_.Backward(dev, x0, step.params, acts_, dxl, step.grads, dx0,
                                       accumulate, step.grad_ready));
    const auto& sparse = sparse_tables();
    for (size_t f = 0; f < sparse.size(); ++f) {
      PS_RETURN_IF_ERROR(dev.EmbeddingBagBackward(Block(dx0, f), step.Bag(f), FieldPooling(f),
                                                  step.grads[sparse[f]]));
    }
    return bottom_.Backward(dev, step.dense, step.params, x0.Columns(0, bottom_width_),
                            dx0.Columns(0, bottom_width_), step.grads, nn::MatrixView(),
                            accumulate, step.grad_ready);
  }

  const int bottom_width_;
  const std::vector<int> offset_;  // FieldOffsets()
  Mlp bottom_;
  CrossNet cross_;
  Mlp top_;
  CrossNet::Activations acts_;
  nn::DeviceBuffer x0_, dx0_, xl_, dxl_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDcnV2Model(const ModelOptions& options,
                                                        std::unique_ptr<nn::Device> device) {
  if (options.num_dense < 1 || options.num_sparse < 0 || options.embedding_dim < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dcn_v2 needs num_dense >= 1, num_sparse >= 0, embedding_dim >= 1; got ",
        options.num_dense, ", ", options.num_sparse, ", ", options.embedding_dim));
  }
  if (options.cross_layers < 1 || options.cross_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dcn_v2 needs cross_layers >= 1 and cross_rank >= 0 (0: full rank); got ",
        options.cross_layers, " and ", options.cross_rank));
  }
  PS_RETURN_IF_ERROR(CheckWidths("bottom_mlp", options.bottom_mlp));
  if (options.bottom_mlp.empty()) {
    return absl::InvalidArgumentError("dcn_v2 needs a bottom_mlp (its output starts x_0)");
  }
  PS_RETURN_IF_ERROR(CheckWidths("top_mlp", options.top_mlp));
  return std::unique_ptr<Model>(new DcnV2Model(options, std::move(device)));
}

}  // namespace pstrain::worker
