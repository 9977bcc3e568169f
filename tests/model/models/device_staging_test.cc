// The staging path that GPUs use (inputs, parameters and gradients copied
// to and from device memory, the batch computed in one piece), exercised on
// the CPU through a device that keeps its own memory and checks that every
// pointer an op receives lies in that memory.
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "model/graph/graph_model.h"
#include "model/models/built_in_graphs.h"
#include "model/nn/cpu_device.h"
#include "tests/model/models/model_grad_check.h"
#include "tests/model/models/model_test_util.h"

namespace pstrain::worker {
namespace {

using nn::Activation;
using nn::Bags;
using nn::ConstMatrixView;
using nn::MatrixView;
using nn::Pooling;

// A "device" whose memory is separate from the host's: host_memory() is
// false, ops run on the CPU, pointers outside its allocations are counted.
class CheckingDevice final : public nn::Device {
 public:
  CheckingDevice() : cpu_(nn::CreateCpuDevice()) {}
  ~CheckingDevice() override {
    for (auto& [p, n] : blocks_) std::free(reinterpret_cast<void*>(p));
  }

  int foreign_pointers() const { return foreign_; }

  std::string name() const override { return "checking"; }
  bool host_memory() const override { return false; }
  absl::StatusOr<void*> Allocate(size_t bytes) override {
    void* p = std::malloc(bytes);
    blocks_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void Free(void* ptr) override {
    blocks_.erase(reinterpret_cast<uintptr_t>(ptr));
    std::free(ptr);
  }
  absl::Status CopyToDevice(void* dst, const void* src, size_t bytes) override {
    Check(dst);
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status CopyToHost(void* dst, const void* src, size_t bytes) override {
    Check(src);
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status Zero(void* dst, size_t bytes) override {
    Check(dst);
    std::memset(dst, 0, bytes);
    return absl::OkStatus();
  }
  absl::Status Synchronize() override { return absl::OkStatus(); }

  absl::Status LinearForward(ConstMatrixView x, const float* w, const float* b, Activation act,
                             MatrixView y) override {
    Check(x.data, x.cols > 0);
    Check(w, x.cols > 0);
    Check(b, b != nullptr);  // no bias: allowed
    Check(y.data);
    return cpu_->LinearForward(x, w, b, act, y);
  }
  absl::Status LinearBackward(ConstMatrixView x, const float* w, ConstMatrixView y,
                              Activation act, MatrixView dy, float* dw, float* db, MatrixView dx,
                              bool accumulate) override {
    Check(x.data, x.cols > 0);
    Check(w, x.cols > 0);
    Check(dy.data);
    Check(dw, x.cols > 0);
    Check(db, db != nullptr);
    if (dx.data != nullptr) Check(dx.data);
    return cpu_->LinearBackward(x, w, y, act, dy, dw, db, dx, accumulate);
  }
  absl::Status ReluForward(ConstMatrixView x, MatrixView y) override {
    Check(x.data);
    Check(y.data);
    return cpu_->ReluForward(x, y);
  }
  absl::Status ReluBackward(ConstMatrixView y, ConstMatrixView dy, MatrixView dx) override {
    Check(y.data);
    Check(dy.data);
    Check(dx.data);
    return cpu_->ReluBackward(y, dy, dx);
  }
  absl::Status EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling,
                                   bool accumulate, MatrixView out) override {
    Check(rows);
    Check(bags.index);
    Check(bags.offsets);
    Check(out.data);
    return cpu_->EmbeddingBagForward(rows, bags, pooling, accumulate, out);
  }
  absl::Status EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags, Pooling pooling,
                                    float* d_rows) override {
    Check(d_out.data);
    Check(bags.index);
    Check(bags.offsets);
    Check(d_rows);
    return cpu_->EmbeddingBagBackward(d_out, bags, pooling, d_rows);
  }
  absl::Status DotInteractionForward(ConstMatrixView t, int n, int dim, MatrixView z) override {
    Check(t.data);
    Check(z.data);
    return cpu_->DotInteractionForward(t, n, dim, z);
  }
  absl::Status DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n, int dim,
                                      MatrixView dt) override {
    Check(t.data);
    Check(dz.data);
    Check(dt.data);
    return cpu_->DotInteractionBackward(t, dz, n, dim, dt);
  }
  absl::Status CopyMatrix(ConstMatrixView src, MatrixView dst) override {
    Check(src.data);
    Check(dst.data);
    return cpu_->CopyMatrix(src, dst);
  }
  absl::Status AddMatrix(ConstMatrixView src, MatrixView dst) override {
    Check(src.data);
    Check(dst.data);
    return cpu_->AddMatrix(src, dst);
  }
  absl::Status CrossCombineForward(ConstMatrixView x0, ConstMatrixView u, ConstMatrixView xl,
                                   MatrixView out) override {
    Check(x0.data);
    Check(u.data);
    Check(xl.data);
    Check(out.data);
    return cpu_->CrossCombineForward(x0, u, xl, out);
  }
  absl::Status CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0, ConstMatrixView u,
                                    MatrixView du, MatrixView dx0, bool accumulate) override {
    Check(g.data);
    Check(x0.data);
    Check(u.data);
    Check(du.data);
    Check(dx0.data);
    return cpu_->CrossCombineBackward(g, x0, u, du, dx0, accumulate);
  }
  absl::Status AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                                 ConstMatrixView target, MatrixView features) override {
    Check(items);
    CheckBags(bags);
    Check(target.data);
    Check(features.data);
    return cpu_->AttentionFeatures(items, bags, first, target, features);
  }
  absl::Status WeightedBagSum(const float* items, const Bags& bags, uint32_t first,
                              const float* scores, MatrixView out) override {
    Check(items);
    CheckBags(bags);
    Check(scores);
    Check(out.data);
    return cpu_->WeightedBagSum(items, bags, first, scores, out);
  }
  absl::Status WeightedBagDot(ConstMatrixView d_out, const float* items, const Bags& bags,
                              uint32_t first, float* d_scores) override {
    Check(d_out.data);
    Check(items);
    CheckBags(bags);
    Check(d_scores);
    return cpu_->WeightedBagDot(d_out, items, bags, first, d_scores);
  }
  absl::Status AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                                        const float* items, const Bags& bags, uint32_t first,
                                        const float* scores, ConstMatrixView target,
                                        float* d_items, MatrixView d_target) override {
    Check(d_out.data);
    Check(d_features.data);
    Check(items);
    CheckBags(bags);
    Check(scores);
    Check(target.data);
    Check(d_items);
    Check(d_target.data, d_target.data != nullptr);
    return cpu_->AttentionPoolingBackward(d_out, d_features, items, bags, first, scores, target,
                                          d_items, d_target);
  }
  absl::Status SequenceInputs(const float* items, const nn::Bags& bags, uint32_t first,
                              const float* positions, int max_length, ConstMatrixView target,
                              MatrixView x) override {
    Check(items);
    Check(positions);
    Check(x.data);
    if (target.data != nullptr) Check(target.data);
    CheckBags(bags);
    return cpu_->SequenceInputs(items, bags, first, positions, max_length, target, x);
  }
  absl::Status SequenceInputsBackward(ConstMatrixView dx, const nn::Bags& bags, uint32_t first,
                                      int max_length, float* d_items, float* d_positions,
                                      MatrixView d_target) override {
    Check(dx.data);
    Check(d_items);
    Check(d_positions);
    if (d_target.data != nullptr) Check(d_target.data);
    CheckBags(bags);
    return cpu_->SequenceInputsBackward(dx, bags, first, max_length, d_items, d_positions,
                                        d_target);
  }
  absl::Status SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                 const nn::Bags& bags, uint32_t first, int heads, int max_n,
                                 float* weights, MatrixView out) override {
    for (const void* p : {q.data, k.data, v.data}) Check(p);
    Check(weights);
    Check(out.data);
    CheckBags(bags);
    return cpu_->SequenceAttention(q, k, v, bags, first, heads, max_n, weights, out);
  }
  absl::Status SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                                         const float* weights, ConstMatrixView d_out,
                                         const nn::Bags& bags, uint32_t first, int heads,
                                         int max_n, MatrixView dq, MatrixView dk,
                                         MatrixView dv) override {
    for (const void* p : {q.data, k.data, v.data, weights, d_out.data}) Check(p);
    for (const void* p : {dq.data, dk.data, dv.data}) Check(p);
    CheckBags(bags);
    return cpu_->SequenceAttentionBackward(q, k, v, weights, d_out, bags, first, heads, max_n, dq,
                                           dk, dv);
  }
  absl::Status SequenceMean(ConstMatrixView y, const nn::Bags& bags, uint32_t first,
                            MatrixView out) override {
    Check(y.data);
    Check(out.data);
    CheckBags(bags);
    return cpu_->SequenceMean(y, bags, first, out);
  }
  absl::Status SequenceMeanBackward(ConstMatrixView d_out, const nn::Bags& bags, uint32_t first,
                                    MatrixView dy) override {
    Check(d_out.data);
    Check(dy.data);
    CheckBags(bags);
    return cpu_->SequenceMeanBackward(d_out, bags, first, dy);
  }
  absl::Status LayerNormForward(ConstMatrixView x, const float* gain, const float* bias,
                                MatrixView y, float* stats) override {
    for (const void* p : {static_cast<const void*>(x.data), static_cast<const void*>(gain),
                          static_cast<const void*>(bias), static_cast<const void*>(y.data),
                          static_cast<const void*>(stats)}) {
      Check(p);
    }
    return cpu_->LayerNormForward(x, gain, bias, y, stats);
  }
  absl::Status LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                                 ConstMatrixView dy, MatrixView dx, float* dgain, float* dbias,
                                 bool accumulate) override {
    for (const void* p : {static_cast<const void*>(x.data), static_cast<const void*>(gain),
                          static_cast<const void*>(stats), static_cast<const void*>(dy.data),
                          static_cast<const void*>(dx.data), static_cast<const void*>(dgain),
                          static_cast<const void*>(dbias)}) {
      Check(p);
    }
    return cpu_->LayerNormBackward(x, gain, stats, dy, dx, dgain, dbias, accumulate);
  }
  absl::Status ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g,
                                MatrixView out) override {
    Check(z.data);
    Check(y.data);
    Check(g.data);
    Check(out.data);
    return cpu_->ExpertMixForward(z, y, g, out);
  }
  absl::Status ExpertMixBackward(ConstMatrixView g, ConstMatrixView y, ConstMatrixView d_out,
                                 MatrixView dz, MatrixView dy) override {
    Check(g.data);
    Check(y.data);
    Check(d_out.data);
    Check(dz.data);
    Check(dy.data);
    return cpu_->ExpertMixBackward(g, y, d_out, dz, dy);
  }
  absl::Status DropoutForward(MatrixView y, float rate, uint64_t seed,
                              int64_t first_row) override {
    Check(y.data);
    return cpu_->DropoutForward(y, rate, seed, first_row);
  }
  absl::Status DropoutBackward(ConstMatrixView y, MatrixView dy, float rate) override {
    Check(y.data);
    Check(dy.data);
    return cpu_->DropoutBackward(y, dy, rate);
  }
  absl::Status FmForward(ConstMatrixView t, int n, int dim, bool accumulate,
                         MatrixView out) override {
    Check(t.data);
    Check(out.data);
    return cpu_->FmForward(t, n, dim, accumulate, out);
  }
  absl::Status FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim, bool accumulate,
                          MatrixView dt) override {
    Check(t.data);
    Check(dy.data);
    Check(dt.data);
    return cpu_->FmBackward(t, dy, n, dim, accumulate, dt);
  }
  absl::StatusOr<double> SigmoidBceLoss(const float* logits, const float* labels, int n,
                                        float* dlogits) override {
    Check(logits);
    Check(labels);
    Check(dlogits);
    return cpu_->SigmoidBceLoss(logits, labels, n, dlogits);
  }
  absl::Status Sigmoid(const float* logits, int n, float* probs) override {
    Check(logits);
    Check(probs);
    return cpu_->Sigmoid(logits, n, probs);
  }

 private:
  // Device bags: index and offsets in device memory; the host's offsets
  // (for sizes) must not be the device's.
  void CheckBags(const Bags& bags) {
    Check(bags.index);
    Check(bags.offsets);
    if (bags.host_offsets == bags.offsets) ++foreign_;
  }
  void Check(const void* p, bool required = true) {
    if (!required) return;
    const auto addr = reinterpret_cast<uintptr_t>(p);
    auto it = blocks_.upper_bound(addr);
    if (p == nullptr || it == blocks_.begin() || addr >= std::prev(it)->first + std::prev(it)->second) {
      ++foreign_;
    }
  }

  std::unique_ptr<nn::Device> cpu_;
  std::map<uintptr_t, size_t> blocks_;
  int foreign_ = 0;
};

// The network of `o` (its graph, or the built-in network o.name's) on
// device `d`.
absl::StatusOr<std::unique_ptr<Model>> Create(ModelOptions o, std::unique_ptr<nn::Device> d) {
  if (o.graph == nullptr) {
    absl::StatusOr<graph::ModelGraph> g = BuiltInGraph(o);
    if (!g.ok()) return g.status();
    o.graph = std::make_shared<const graph::ModelGraph>(*std::move(g));
  }
  return CreateGraphModel(o, std::move(d));
}

// One step and a Predict of `options`' network on the checking device give
// the CPU's loss, every gradient and every head's output, and every op's
// pointers lie in the device's memory. `extra_labels`: the batch's labels
// beside the first (every third missing).
void ExpectStagedStepIsTheCpuStep(const ModelOptions& options, int extra_labels = 0) {
  auto device = std::make_unique<CheckingDevice>();
  CheckingDevice* checking = device.get();
  auto staged = Create(options, std::move(device));
  auto cpu = CreateModel(options);
  ASSERT_TRUE(staged.ok() && cpu.ok()) << staged.status() << cpu.status();
  const int heads = static_cast<int>((*cpu)->heads().size());
  std::mt19937 rng(12);
  for (int size : {600, 40}) {  // shrinking batches reuse the buffers
    Batch batch = testing::RandomBatch(size, 3, 3, 3, 30, rng);
    if (extra_labels > 0) testing::AddExtraLabels(&batch, extra_labels, rng);
    BatchPlan plan;
    (*cpu)->Plan(batch, &plan);
    testing::LocalParams cpu_store(**cpu, 0.4f), staged_store(**staged, 0.4f);
    ParamRefs cpu_params, staged_params;
    GradRefs cpu_grads, staged_grads;
    cpu_store.Bind(plan, &cpu_params, &cpu_grads);
    staged_store.Bind(plan, &staged_params, &staged_grads);
    auto a = (*cpu)->TrainStep(batch, plan, cpu_params, &cpu_grads);
    auto b = (*staged)->TrainStep(batch, plan, staged_params, &staged_grads);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
    EXPECT_NEAR(a->loss_sum, b->loss_sum, 1e-5 * a->loss_sum);
    EXPECT_EQ(a->head_rows, b->head_rows);
    for (const TableSpec& t : (*cpu)->tables()) {
      const auto& ga = cpu_store.grad(t.id);
      const auto& gb = staged_store.grad(t.id);
      ASSERT_EQ(ga.size(), gb.size());
      for (size_t i = 0; i < ga.size(); ++i) {
        ASSERT_NEAR(ga[i], gb[i], 1e-4 * (1 + std::abs(ga[i]))) << t.name << "[" << i << "]";
      }
    }
    std::vector<float> pa(size * heads), pb(size * heads);
    ASSERT_TRUE((*cpu)->Predict(batch, plan, cpu_params, pa).ok());
    ASSERT_TRUE((*staged)->Predict(batch, plan, staged_params, pb).ok());
    for (int i = 0; i < size * heads; ++i) ASSERT_NEAR(pa[i], pb[i], 1e-5 * (1 + std::abs(pa[i])));
  }
  EXPECT_EQ(checking->foreign_pointers(), 0) << "an op got a pointer outside device memory";
}

class DeviceStagingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceStagingTest, SeparateDeviceMemoryGivesTheCpuStep) {
  ExpectStagedStepIsTheCpuStep(testing::TinyOptions(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Models, DeviceStagingTest,
                         ::testing::Values("lr", "wide_deep", "dlrm", "dcn_v2", "deepfm",
                                           "deep_tower"));

ModelOptions WithGraph(const std::string& text) {
  ModelOptions o = testing::TinyOptions("dlrm");
  absl::StatusOr<graph::ModelGraph> g = graph::ParseModelGraph(text, "staged.json");
  EXPECT_TRUE(g.ok()) << g.status();
  if (g.ok()) o.graph = std::make_shared<graph::ModelGraph>(*std::move(g));
  return o;
}

// DIN's target attention over a history (C3) sharing C2's table, and C3
// pooled by mean, as a GPU runs them.
TEST(DeviceStagingGraph, TargetAttentionAndPoolGiveTheCpuStep) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "din", "type": "target_attention", "sequence": "C3", "input": "C2", "widths": [5]},
    {"name": "mean", "type": "pool", "sequence": "C3", "pooling": "mean"},
    {"name": "top", "type": "mlp", "inputs": ["din", "mean", "C1", "C2", "dense"], "widths": [6, 1],
     "dropout": 0.3}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  ExpectStagedStepIsTheCpuStep(o);
}

// BST's self-attention over C3 (2 heads; positions past the second share
// it; once with the candidate C2 appended to the sequence) beside DIN's
// attention over the same table, as a GPU runs them.
TEST(DeviceStagingGraph, SelfAttentionGivesTheCpuStep) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "bst", "type": "self_attention", "sequence": "C3", "heads": 2, "max_length": 2},
    {"name": "full", "type": "self_attention", "sequence": "C3", "feed_forward": 6, "layer_norm": true},
    {"name": "candidate", "type": "self_attention", "sequence": "C3", "input": "C2", "max_length": 3},
    {"name": "din", "type": "target_attention", "sequence": "C3", "input": "C2", "widths": [5]},
    {"name": "top", "type": "mlp", "inputs": ["bst", "full", "candidate", "din", "C1", "C2", "dense"],
     "widths": [6, 1]}],
    "heads": [{"input": "top"}]})");
  o.field_ids_of = {-1, -1, 1};
  ExpectStagedStepIsTheCpuStep(o);
}

// MMoE and PLE's gates over experts, three heads (one with missing labels,
// one a regression), as a GPU runs them.
TEST(DeviceStagingGraph, GatesAndSeveralHeadsGiveTheCpuStep) {
  ModelOptions o = WithGraph(R"({"layers": [
    {"name": "x", "type": "concat", "inputs": ["dense", "embeddings"]},
    {"name": "shared", "type": "experts", "input": "x", "count": 3, "widths": [5, 4]},
    {"name": "own", "type": "experts", "input": "dense", "count": 1, "widths": [4]},
    {"name": "g1", "type": "gate", "input": "x", "experts": ["shared"]},
    {"name": "g2", "type": "gate", "inputs": ["dense", "C1"], "experts": ["shared", "own"]},
    {"name": "t1", "type": "mlp", "input": "g1", "widths": [5, 1]},
    {"name": "t2", "type": "mlp", "input": "g2", "widths": [3, 1]},
    {"name": "t3", "type": "linear", "input": "g2"}],
    "heads": [{"name": "ctr", "input": "t1"},
              {"name": "cvr", "input": "t2", "label": "bought", "weight": 0.5},
              {"name": "spend", "input": "t3", "label": "spent", "loss": "mse", "weight": 2}]})");
  o.label_names = {"clicked", "bought", "spent"};
  ExpectStagedStepIsTheCpuStep(o, /*extra_labels=*/2);
}

}  // namespace
}  // namespace pstrain::worker
