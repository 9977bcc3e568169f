// Optimizer::Create validation and the state layout of each kind.
#include <cmath>
#include <vector>

#include "common/optim/optimizer.h"
#include "gtest/gtest.h"

namespace pstrain::optim {
namespace {

OptimizerConfig Config(OptimizerKind kind) {
  OptimizerConfig c;
  c.kind = kind;
  return c;
}

absl::StatusCode CreateCode(const OptimizerConfig& c) {
  return Optimizer::Create(c).status().code();
}

TEST(OptimizerConfig, DefaultsOfEveryKindAreValid) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kAdagrad,
                             OptimizerKind::kRowwiseAdagrad, OptimizerKind::kAdam,
                             OptimizerKind::kFtrl}) {
    EXPECT_TRUE(Optimizer::Create(Config(kind)).ok()) << OptimizerKindName(kind);
  }
}

TEST(OptimizerConfig, RejectsNonPositiveOrNonFiniteLearningRate) {
  OptimizerConfig c = Config(OptimizerKind::kAdagrad);
  for (float lr : {0.0f, -0.1f, NAN, INFINITY}) {
    c.lr = lr;
    EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument) << lr;
  }
}

TEST(OptimizerConfig, RejectsMomentumOfOneAndNesterovWithoutMomentum) {
  OptimizerConfig c = Config(OptimizerKind::kSgd);
  c.momentum = 1.0f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.momentum = 0.0f;
  c.nesterov = true;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.momentum = 0.9f;
  EXPECT_TRUE(Optimizer::Create(c).ok());
}

TEST(OptimizerConfig, RejectsNegativeWeightDecayAndAdamBetaOfOne) {
  OptimizerConfig c = Config(OptimizerKind::kAdam);
  c.weight_decay = -1e-4f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.weight_decay = 0.0f;
  c.beta1 = 1.0f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.beta1 = 0.9f;
  c.beta2 = 1.5f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.beta2 = 0.999f;
  c.eps = 0.0f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
}

TEST(OptimizerConfig, AdagradNeedsEpsOrInitialAccumulator) {
  OptimizerConfig c = Config(OptimizerKind::kAdagrad);
  c.eps = 0.0f;
  c.initial_accumulator = 0.0f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.initial_accumulator = 0.1f;
  EXPECT_TRUE(Optimizer::Create(c).ok());
}

TEST(OptimizerConfig, FtrlRejectsWeightDecayAndNegativeRegularizers) {
  OptimizerConfig c = Config(OptimizerKind::kFtrl);
  c.weight_decay = 0.01f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.weight_decay = 0.0f;
  c.ftrl_l1 = -1.0f;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
  c.ftrl_l1 = 0.0f;
  c.ftrl_l2 = NAN;
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
}

TEST(OptimizerConfig, RejectsUnknownKind) {
  OptimizerConfig c = Config(static_cast<OptimizerKind>(42));
  EXPECT_EQ(CreateCode(c), absl::StatusCode::kInvalidArgument);
}

TEST(OptimizerLayout, StateSizeOfEachKind) {
  struct Case {
    OptimizerConfig config;
    size_t floats_for_16;
    bool row_wise;
    bool uses_step;
  };
  OptimizerConfig momentum = Config(OptimizerKind::kSgd);
  momentum.momentum = 0.9f;
  const Case cases[] = {
      {Config(OptimizerKind::kSgd), 0, false, false},
      {momentum, 16, false, false},
      {Config(OptimizerKind::kAdagrad), 16, false, false},
      {Config(OptimizerKind::kRowwiseAdagrad), 1, true, false},
      {Config(OptimizerKind::kAdam), 32, false, true},
      {Config(OptimizerKind::kFtrl), 32, false, false},
  };
  for (const Case& c : cases) {
    auto opt = Optimizer::Create(c.config);
    ASSERT_TRUE(opt.ok());
    EXPECT_EQ((*opt)->StateFloats(16), c.floats_for_16) << OptimizerKindName(c.config.kind);
    EXPECT_EQ((*opt)->row_wise(), c.row_wise);
    EXPECT_EQ((*opt)->uses_step(), c.uses_step);
  }
}

TEST(OptimizerLayout, InitStateWritesInitialAccumulatorIntoEveryPlane) {
  OptimizerConfig c = Config(OptimizerKind::kAdagrad);
  c.initial_accumulator = 0.25f;
  auto opt = Optimizer::Create(c);
  ASSERT_TRUE(opt.ok());
  std::vector<float> state(5, -1.0f);
  (*opt)->InitState(state.data(), 5, 5);
  EXPECT_EQ(state, std::vector<float>(5, 0.25f));

  c.kind = OptimizerKind::kAdam;
  auto adam = Optimizer::Create(c);
  ASSERT_TRUE(adam.ok());
  // Two planes 4 apart, each 3 long: the gap stays untouched.
  std::vector<float> planes(7, -1.0f);
  (*adam)->InitState(planes.data(), 4, 3);
  EXPECT_EQ(planes, (std::vector<float>{0, 0, 0, -1, 0, 0, 0}));
}

}  // namespace
}  // namespace pstrain::optim
