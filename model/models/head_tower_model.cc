#include "model/models/head_tower_model.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

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
  BindHeadInputs(step, &head_in_);
  return head_->Backward(device(), head_in_, step.params, *head_acts_, dz, step.grads, accumulate,
                         step.grad_ready);
}

}  // namespace pstrain::worker
