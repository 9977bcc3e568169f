#include "model/models/head_tower_model.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/mlp.h"

namespace pstrain::worker {
namespace {

// The step's rows as a FeatureHead's inputs: the dense features and the
// bags of each sparse position's first field.
template <class StepData>
void BindHeadInputs(const StepData& step, HeadInputs* in) {
  in->dense = step.dense;
  in->bags.resize(step.bag_begin.size());
  for (size_t f = 0; f < in->bags.size(); ++f) in->bags[f] = step.Bag(static_cast<int>(f));
}

// The head's tables and the top's, in that order: declare_head runs on the
// registry before the top MLP declares its own.
TableRegistry* Declared(TableRegistry* registry,
                        const std::function<void(TableRegistry*)>& declare_head) {
  declare_head(registry);
  return registry;
}

std::vector<int> WithLogitLayer(std::vector<int> widths) {
  widths.push_back(1);
  return widths;
}

class HeadAndTopMlpModel final : public HeadTowerModel {
 public:
  HeadAndTopMlpModel(const ModelOptions& options, std::unique_ptr<nn::Device> device,
                     const std::function<void(TableRegistry*)>& declare_head, int head_width)
      : HeadTowerModel(options, std::move(device)),
        top_(Declared(&registry(), declare_head), "top", head_width,
             WithLogitLayer(options.top_mlp), /*relu_last=*/false, options.seed,
             /*dropout_hidden=*/true) {
    for (int f = 0; f < options.num_sparse; ++f) {
      registry().AddSparse(absl::StrCat("emb.", SparseFieldName(options, f)), FieldDim(options, f),
                           EmbeddingInit(FieldDim(options, f), options.seed), {f});
    }
  }

 private:
  int tower_in() const override { return top_.in(); }
  absl::Status ReserveTower(int batch) override { return top_.Reserve(&device(), batch); }
  absl::Status TowerForward(const StepData& step, nn::ConstMatrixView z,
                            nn::MatrixView logits) override {
    return top_.Forward(device(), z, step.params, logits, step.dropout);
  }
  absl::Status TowerBackward(const StepData& step, nn::ConstMatrixView z,
                             nn::ConstMatrixView logits, nn::MatrixView dlogits,
                             nn::MatrixView dz, bool accumulate) override {
    return top_.Backward(device(), z, step.params, logits, dlogits, step.grads, dz, accumulate,
                         step.grad_ready);
  }

  Mlp top_;
};

}  // namespace

absl::Status HeadTowerModel::Init() {
  PS_ASSIGN_OR_RETURN(head_, CreateFeatureHead(options(), *this));
  if (head_->out_width() != tower_in()) {
    return absl::InternalError(absl::StrCat(options().name, ": the head writes ",
                                            head_->out_width(), " columns, the tower reads ",
                                            tower_in()));
  }
  head_acts_ = head_->NewActivations();
  return absl::OkStatus();
}

absl::Status HeadTowerModel::Reserve(int batch) {
  nn::Device* dev = &device();
  const size_t n = static_cast<size_t>(batch) * tower_in();
  PS_RETURN_IF_ERROR(z_.ReserveElements(dev, n));
  PS_RETURN_IF_ERROR(dz_.ReserveElements(dev, n));
  return ReserveTower(batch);
}

absl::Status HeadTowerModel::Forward(const StepData& step, nn::MatrixView logits) {
  nn::MatrixView z(z_.as(), step.batch, tower_in());
  BindHeadInputs(step, &head_in_);
  PS_RETURN_IF_ERROR(head_->Forward(device(), head_in_, step.params, head_acts_.get(), z));
  return TowerForward(step, z, logits);
}

absl::Status HeadTowerModel::Backward(const StepData& step, nn::ConstMatrixView logits,
                                      nn::MatrixView dlogits, bool accumulate) {
  nn::ConstMatrixView z(z_.as(), step.batch, tower_in());
  nn::MatrixView dz(dz_.as(), step.batch, tower_in());
  PS_RETURN_IF_ERROR(TowerBackward(step, z, logits, dlogits, dz, accumulate));
  // head_in_ holds these rows: Backward follows the Forward on the same step.
  return head_->Backward(device(), head_in_, step.params, *head_acts_, dz, step.grads, accumulate,
                         step.grad_ready);
}

absl::StatusOr<std::unique_ptr<Model>> CreateHeadAndTopMlpModel(
    const ModelOptions& options, std::unique_ptr<nn::Device> device,
    const std::function<void(TableRegistry*)>& declare_head, int head_width) {
  auto model =
      std::make_unique<HeadAndTopMlpModel>(options, std::move(device), declare_head, head_width);
  PS_RETURN_IF_ERROR(model->Init());
  return std::unique_ptr<Model>(std::move(model));
}

}  // namespace pstrain::worker
