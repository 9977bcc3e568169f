#include <cmath>
#include <thread>
#include <vector>

#include "common/optim/initializer.h"
#include "gtest/gtest.h"
#include "server/ps/tables/dense_shard.h"

namespace pstrain::server {
namespace {

TableSpec Spec(OptimizerKind kind, uint64_t size = 100) {
  TableSpec spec;
  spec.id = 5;
  spec.name = "top.2.weight";
  spec.kind = TableKind::kDense;
  spec.size = size;
  spec.optimizer.kind = kind;
  spec.optimizer.lr = 0.1f;
  spec.init.kind = InitKind::kNormal;
  spec.init.scale = 0.1f;
  spec.init.seed = 17;
  return spec;
}

std::unique_ptr<DenseShard> Make(const TableSpec& spec, uint64_t offset, uint64_t length) {
  auto shard = DenseShard::Create(spec, offset, length);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return *std::move(shard);
}

std::vector<float> Floats(const Buffer& b) {
  auto span = b.as<float>();
  return {span.begin(), span.end()};
}

std::vector<float> Weights(const DenseShard& shard) {
  return {shard.weights().begin(), shard.weights().end()};
}

TEST(DenseShard, InitialWeightsDependOnTheGlobalIndexOnly) {
  TableSpec spec = Spec(OptimizerKind::kSgd);
  auto whole = Make(spec, 0, 100);
  auto part = Make(spec, 40, 30);
  EXPECT_EQ(Weights(*part),
            std::vector<float>(whole->weights().begin() + 40, whole->weights().begin() + 70));
  auto init = optim::Initializer::Create(spec.init, spec.id);
  EXPECT_EQ(part->weights()[0], init->Value(40, 0));
}

TEST(DenseShard, CreateRejectsRangesOutsideTheTableAndSparseSpecs) {
  TableSpec spec = Spec(OptimizerKind::kSgd);
  EXPECT_EQ(DenseShard::Create(spec, 90, 20).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DenseShard::Create(spec, 10, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DenseShard::Create(spec, UINT64_MAX, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec.kind = TableKind::kSparse;
  EXPECT_EQ(DenseShard::Create(spec, 0, 10).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DenseShard, SnapshotTakenBeforePushKeepsOldValues) {
  auto shard = Make(Spec(OptimizerKind::kAdagrad), 0, 100);
  auto before = shard->Snapshot(0, 100);
  ASSERT_TRUE(before.ok());
  const std::vector<float> old = Floats(*before);
  std::vector<float> grads(100, 1.0f);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  EXPECT_EQ(Floats(*before), old);
  auto after = shard->Snapshot(0, 100);
  ASSERT_TRUE(after.ok());
  EXPECT_NE(after->data(), before->data());
  for (size_t i = 0; i < 100; ++i) EXPECT_LT(Floats(*after)[i], old[i]) << i;
}

TEST(DenseShard, PushWithoutLiveSnapshotsUpdatesInPlace) {
  auto shard = Make(Spec(OptimizerKind::kSgd), 0, 100);
  const float* address = nullptr;
  {
    auto snap = shard->Snapshot(10, 5);
    ASSERT_TRUE(snap.ok());
    address = reinterpret_cast<const float*>(snap->data()) - 10;
  }
  std::vector<float> grads(100, 1.0f);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  EXPECT_EQ(shard->weights().data(), address);
}

TEST(DenseShard, ArraysFreedBySnapshotsAreRecycled) {
  auto shard = Make(Spec(OptimizerKind::kSgd), 0, 100);
  std::vector<float> grads(100, 1.0f);
  const float* first = shard->weights().data();
  auto snap = shard->Snapshot(0, 100);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());  // copy-on-write
  const float* second = shard->weights().data();
  EXPECT_NE(second, first);
  EXPECT_EQ(shard->pooled_arrays(), 0u);
  snap = absl::StatusOr<Buffer>(Buffer());  // the last reader of `first` lets go
  EXPECT_EQ(shard->pooled_arrays(), 1u);
  auto snap2 = shard->Snapshot(0, 100);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  EXPECT_EQ(shard->weights().data(), first);  // taken from the pool
  EXPECT_EQ(shard->pooled_arrays(), 0u);
}

TEST(DenseShard, PartialPushChangesOnlyItsRangeAlsoWhenCopying) {
  TableSpec spec = Spec(OptimizerKind::kSgd);
  for (bool with_snapshot : {false, true}) {
    auto shard = Make(spec, 20, 50);  // table offsets [20, 70)
    const std::vector<float> old = Weights(*shard);
    absl::StatusOr<Buffer> snap = Buffer();
    if (with_snapshot) snap = shard->Snapshot(20, 50);
    std::vector<float> grads = {1.0f, 2.0f, 3.0f};
    ASSERT_TRUE(shard->Push(30, grads, 0.5f).ok());
    std::vector<float> now = Weights(*shard);
    for (size_t i = 0; i < 50; ++i) {
      if (i >= 10 && i < 13) {
        EXPECT_FLOAT_EQ(now[i], old[i] - 0.1f * 0.5f * grads[i - 10]) << i;
      } else {
        EXPECT_EQ(now[i], old[i]) << i;
      }
    }
    if (with_snapshot) {
      EXPECT_EQ(Floats(*snap), old);
    }
  }
}

TEST(DenseShard, RangesOutsideTheShardAreOutOfRange) {
  auto shard = Make(Spec(OptimizerKind::kSgd), 20, 50);
  std::vector<float> grads(10, 1.0f);
  EXPECT_EQ(shard->Push(19, grads, 1.0f).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(shard->Push(61, grads, 1.0f).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(shard->Push(UINT64_MAX - 2, grads, 1.0f).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(shard->Push(60, grads, 1.0f).ok());
  EXPECT_EQ(shard->Snapshot(0, 5).status().code(), absl::StatusCode::kOutOfRange);
  absl::Status status = shard->Snapshot(65, 6).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(status.message().find("top.2.weight"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("65"), absl::string_view::npos) << status;
  EXPECT_TRUE(shard->Snapshot(65, 5).ok());
}

TEST(DenseShard, NonFiniteGradientIsRejectedAndLeavesShardUnchanged) {
  auto shard = Make(Spec(OptimizerKind::kAdam), 0, 16);
  std::vector<float> grads(16, 0.5f);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  const std::vector<float> weights = Weights(*shard);
  const std::vector<float> state(shard->state().begin(), shard->state().end());
  const uint64_t version = shard->version();
  grads[9] = -INFINITY;
  absl::Status status = shard->Push(0, grads, 1.0f);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("offset 9"), absl::string_view::npos) << status;
  grads[9] = 0.5f;
  EXPECT_EQ(shard->Push(0, grads, NAN).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Weights(*shard), weights);
  EXPECT_EQ(std::vector<float>(shard->state().begin(), shard->state().end()), state);
  EXPECT_EQ(shard->step(), 1u);
  EXPECT_EQ(shard->version(), version);
}

TEST(DenseShard, AdamCountsOneStepPerPush) {
  TableSpec spec = Spec(OptimizerKind::kAdam, 8);
  spec.init.kind = InitKind::kZeros;
  spec.optimizer.lr = 0.01f;
  auto shard = Make(spec, 0, 8);
  EXPECT_EQ(shard->state_floats(), 16u);
  std::vector<float> grads(8, 2.0f);
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  EXPECT_EQ(shard->step(), 1u);
  for (float w : shard->weights()) EXPECT_NEAR(w, -0.01f, 1e-6);  // t = 1: a step of lr
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  EXPECT_EQ(shard->step(), 2u);
}

TEST(DenseShard, RowwiseAdagradRunsPerElement) {
  TableSpec spec = Spec(OptimizerKind::kRowwiseAdagrad, 4);
  spec.init.kind = InitKind::kZeros;
  spec.optimizer.initial_accumulator = 0.0f;
  auto shard = Make(spec, 0, 4);
  EXPECT_EQ(shard->state_floats(), 4u);
  std::vector<float> grads = {1.0f, 2.0f, -3.0f, 4.0f};
  ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(shard->state()[i], grads[i] * grads[i], 1e-6);
    EXPECT_NEAR(shard->weights()[i], grads[i] > 0 ? -0.1f : 0.1f, 1e-6);  // lr * sign
  }
}

TEST(DenseShard, RestoreReplacesWeightsAndStateButNotLiveSnapshots) {
  auto shard = Make(Spec(OptimizerKind::kAdagrad, 6), 0, 6);
  auto snap = shard->Snapshot(0, 6);
  ASSERT_TRUE(snap.ok());
  const std::vector<float> old = Floats(*snap);
  std::vector<float> weights = {1, 2, 3, 4, 5, 6}, state = {6, 5, 4, 3, 2, 1};
  ASSERT_TRUE(shard->Restore(weights, state, 42).ok());
  EXPECT_EQ(Weights(*shard), weights);
  EXPECT_EQ(std::vector<float>(shard->state().begin(), shard->state().end()), state);
  EXPECT_EQ(shard->step(), 42u);
  EXPECT_EQ(Floats(*snap), old);
  EXPECT_EQ(shard->Restore(weights, std::vector<float>(3), 0).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DenseShard, SnapshotsOutliveTheShard) {
  absl::StatusOr<Buffer> snap;
  std::vector<float> values;
  {
    auto shard = Make(Spec(OptimizerKind::kSgd), 0, 100);
    snap = shard->Snapshot(50, 10);
    values = std::vector<float>(shard->weights().begin() + 50, shard->weights().begin() + 60);
  }
  EXPECT_EQ(Floats(*snap), values);
}

TEST(DenseShard, SnapshotsReleasedOnAnotherThreadNeverSeeWrites) {
  // The transport thread holds snapshots while the shard thread pushes; each
  // snapshot must read the same values for as long as it is held.
  auto shard = Make(Spec(OptimizerKind::kSgd, 4096), 0, 4096);
  std::vector<float> grads(4096, 0.01f);
  for (int round = 0; round < 50; ++round) {
    auto snap = shard->Snapshot(0, 4096);
    ASSERT_TRUE(snap.ok());
    const std::vector<float> seen = Floats(*snap);
    std::thread reader([buffer = *std::move(snap), seen]() mutable {
      for (int i = 0; i < 20; ++i) ASSERT_EQ(Floats(buffer), seen);
      buffer = Buffer();  // released here, concurrently with the pushes
    });
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(shard->Push(0, grads, 1.0f).ok());
    reader.join();
  }
  EXPECT_LE(shard->pooled_arrays(), 2u);
}

}  // namespace
}  // namespace pstrain::server
