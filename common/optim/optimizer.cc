#include "common/optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/optim/kernels.h"
#include "common/status.h"

namespace pstrain::optim {
namespace {

// Checks lo <= value < hi (or <= hi when hi_inclusive), value finite.
absl::Status CheckRange(const char* kind, const char* field, float value, float lo, float hi,
                        bool hi_inclusive) {
  bool ok = std::isfinite(value) && value >= lo && (hi_inclusive ? value <= hi : value < hi);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(kind, " optimizer: ", field, " = ", value,
                                                 " is outside [", lo, ", ", hi,
                                                 hi_inclusive ? "]" : ")"));
}

constexpr float kInf = INFINITY;

}  // namespace

const char* OptimizerKindName(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return "sgd";
    case OptimizerKind::kAdagrad:
      return "adagrad";
    case OptimizerKind::kRowwiseAdagrad:
      return "rowwise_adagrad";
    case OptimizerKind::kAdam:
      return "adam";
    case OptimizerKind::kFtrl:
      return "ftrl";
  }
  return "unknown";
}

absl::Status Optimizer::Validate(const OptimizerConfig& c) {
  const char* name = OptimizerKindName(c.kind);
  if (c.kind > OptimizerKind::kFtrl) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown optimizer kind ", static_cast<int>(c.kind)));
  }
  if (!(std::isfinite(c.lr) && c.lr > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " optimizer: lr = ", c.lr, " must be finite and > 0"));
  }
  // The largest float below 1: std::nextafter is not constexpr in C++20.
  const float kBelowOne = std::nextafter(1.0f, 0.0f);
  switch (c.kind) {
    case OptimizerKind::kSgd:
      PS_RETURN_IF_ERROR(CheckRange(name, "momentum", c.momentum, 0.0f, 1.0f, false));
      if (c.nesterov && c.momentum == 0.0f) {
        return absl::InvalidArgumentError("sgd optimizer: nesterov requires momentum > 0");
      }
      return CheckRange(name, "weight_decay", c.weight_decay, 0.0f, kInf, true);
    case OptimizerKind::kAdagrad:
    case OptimizerKind::kRowwiseAdagrad:
      PS_RETURN_IF_ERROR(CheckRange(name, "weight_decay", c.weight_decay, 0.0f, kInf, true));
      PS_RETURN_IF_ERROR(
          CheckRange(name, "initial_accumulator", c.initial_accumulator, 0.0f, kInf, true));
      if (c.eps <= 0.0f && c.initial_accumulator <= 0.0f) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, " optimizer: eps and initial_accumulator are both 0 (division by zero)"));
      }
      return CheckRange(name, "eps", c.eps, 0.0f, kInf, true);
    case OptimizerKind::kAdam:
      PS_RETURN_IF_ERROR(CheckRange(name, "weight_decay", c.weight_decay, 0.0f, kInf, true));
      PS_RETURN_IF_ERROR(CheckRange(name, "beta1", c.beta1, 0.0f, kBelowOne, true));
      PS_RETURN_IF_ERROR(CheckRange(name, "beta2", c.beta2, 0.0f, kBelowOne, true));
      if (!(std::isfinite(c.eps) && c.eps > 0.0f)) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " optimizer: eps = ", c.eps, " must be finite and > 0"));
      }
      return absl::OkStatus();
    case OptimizerKind::kFtrl:
      if (c.weight_decay != 0.0f) {
        return absl::InvalidArgumentError(
            "ftrl optimizer: weight_decay is not used by FTRL; set ftrl_l2 instead");
      }
      PS_RETURN_IF_ERROR(CheckRange(name, "ftrl_beta", c.ftrl_beta, 0.0f, kInf, true));
      PS_RETURN_IF_ERROR(CheckRange(name, "ftrl_l1", c.ftrl_l1, 0.0f, kInf, true));
      return CheckRange(name, "ftrl_l2", c.ftrl_l2, 0.0f, kInf, true);
  }
  return absl::InvalidArgumentError("unreachable optimizer kind");
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerConfig& config) {
  PS_RETURN_IF_ERROR(Validate(config));
  switch (config.kind) {
    case OptimizerKind::kSgd:
      return internal::NewSgd(config);
    case OptimizerKind::kAdagrad:
      return internal::NewAdagrad(config);
    case OptimizerKind::kRowwiseAdagrad:
      return internal::NewRowwiseAdagrad(config);
    case OptimizerKind::kAdam:
      return internal::NewAdam(config);
    case OptimizerKind::kFtrl:
      return internal::NewFtrl(config);
  }
  return absl::InvalidArgumentError("unknown optimizer kind");
}

void Optimizer::InitState(float* state, size_t state_stride, size_t n) const {
  if (row_wise()) {
    state[0] = 0.0f;
    return;
  }
  for (size_t k = 0; k < StatePlanes(); ++k) {
    std::fill(state + k * state_stride, state + k * state_stride + n, 0.0f);
  }
}

}  // namespace pstrain::optim
