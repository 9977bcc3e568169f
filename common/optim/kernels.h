// Internal to common/optim: constructors of the concrete optimizers, called
// by Optimizer::Create after the config was validated.
#pragma once

#include <memory>

#include "common/optim/optimizer.h"

namespace pstrain::optim::internal {

std::unique_ptr<Optimizer> NewSgd(const OptimizerConfig& config);
std::unique_ptr<Optimizer> NewAdagrad(const OptimizerConfig& config);
std::unique_ptr<Optimizer> NewRowwiseAdagrad(const OptimizerConfig& config);
std::unique_ptr<Optimizer> NewAdam(const OptimizerConfig& config);
std::unique_ptr<Optimizer> NewFtrl(const OptimizerConfig& config);

}  // namespace pstrain::optim::internal
