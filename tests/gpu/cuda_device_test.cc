// The CUDA device against the CPU reference: every op of nn::Device, forward
// and backward, on the same inputs: shapes that are not multiples of the
// kernels' block size (256 threads), strided views, a batch of one and an
// empty batch; embedding bags with repeated ids (the backward's atomics);
// and a CUDA error as a Status naming the call (whole model steps:
// cuda_model_step_test.cc). Label gpu; skipped, naming why, where no
// GPU (or no CUDA build) is available. Agreement: |gpu - cpu| <= 1e-4
// (1 + |cpu|) per element for the layers; for whole steps, 1e-4 relative to
// the largest element of each tensor (sums over hundreds of rows run in
// another order).
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "model/nn/device.h"
#include "model/nn/interaction.h"
#include "tests/model/models/model_test_util.h"
#include "tests/gpu/expect_close.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::RandomVector;


class CudaDeviceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto gpu = CreateDevice("cuda");
    if (!gpu.ok()) {
      ASSERT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable) << gpu.status();
      GTEST_SKIP() << "no GPU: " << gpu.status();
    }
    gpu_ = std::move(*gpu);
    cpu_ = std::move(*CreateDevice("cpu"));
  }

  // A device copy of host data; kept alive by the fixture.
  template <class T>
  T* Up(const std::vector<T>& host) {
    buffers_.emplace_back();
    EXPECT_TRUE(buffers_.back().Reserve(gpu_.get(), sizeof(T) * std::max<size_t>(host.size(), 1)).ok());
    EXPECT_TRUE(gpu_->CopyToDevice(buffers_.back().data(), host.data(), sizeof(T) * host.size()).ok());
    return buffers_.back().as<T>();
  }
  std::vector<float> Down(const float* device, size_t n) {
    std::vector<float> host(n);
    EXPECT_TRUE(gpu_->CopyToHost(host.data(), device, sizeof(float) * n).ok());
    return host;
  }

  std::unique_ptr<Device> cpu_, gpu_;
  std::vector<DeviceBuffer> buffers_;
  std::mt19937 rng_{42};
};

TEST_F(CudaDeviceTest, LinearMatchesCpuForwardAndBackward) {
  struct Case {
    int batch, in, out, x_stride;
    Activation act;
    bool accumulate;
  };
  for (const Case c : {Case{37, 13, 64, 13, Activation::kRelu, false},
                       Case{64, 367, 64, 370, Activation::kRelu, true},
                       Case{50, 32, 1, 32, Activation::kNone, false},
                       Case{9, 5, 3, 8, Activation::kNone, true}}) {
    auto x = RandomVector(static_cast<size_t>(c.batch) * c.x_stride, rng_);
    auto w = RandomVector(static_cast<size_t>(c.out) * c.in, rng_);
    auto b = RandomVector(c.out, rng_);
    auto r = RandomVector(static_cast<size_t>(c.batch) * c.out, rng_);
    auto dw0 = RandomVector(w.size(), rng_), db0 = RandomVector(b.size(), rng_);
    // CPU reference.
    std::vector<float> y(r.size()), dy = r, dw = dw0, db = db0, dx(static_cast<size_t>(c.batch) * c.in);
    ConstMatrixView xv(x.data(), c.batch, c.in, c.x_stride);
    ASSERT_TRUE(cpu_->LinearForward(xv, w.data(), b.data(), c.act, MatrixView(y.data(), c.batch, c.out)).ok());
    ASSERT_TRUE(cpu_->LinearBackward(xv, w.data(), ConstMatrixView(y.data(), c.batch, c.out), c.act,
                                     MatrixView(dy.data(), c.batch, c.out), dw.data(), db.data(),
                                     MatrixView(dx.data(), c.batch, c.in), c.accumulate).ok());
    // GPU.
    float* gx = Up(x);
    float* gw = Up(w);
    float* gb = Up(b);
    float* gy = Up(std::vector<float>(r.size()));
    float* gdy = Up(r);
    float* gdw = Up(dw0);
    float* gdb = Up(db0);
    float* gdx = Up(std::vector<float>(dx.size()));
    ConstMatrixView gxv(gx, c.batch, c.in, c.x_stride);
    ASSERT_TRUE(gpu_->LinearForward(gxv, gw, gb, c.act, MatrixView(gy, c.batch, c.out)).ok());
    ASSERT_TRUE(gpu_->LinearBackward(gxv, gw, ConstMatrixView(gy, c.batch, c.out), c.act,
                                     MatrixView(gdy, c.batch, c.out), gdw, gdb,
                                     MatrixView(gdx, c.batch, c.in), c.accumulate).ok());
    const std::string what = "linear " + std::to_string(c.in) + "->" + std::to_string(c.out);
    ExpectClose(Down(gy, y.size()), y, what + " y");
    ExpectClose(Down(gdy, dy.size()), dy, what + " dz");
    ExpectClose(Down(gdw, dw.size()), dw, what + " dw");
    ExpectClose(Down(gdb, db.size()), db, what + " db");
    ExpectClose(Down(gdx, dx.size()), dx, what + " dx");
  }
}

TEST_F(CudaDeviceTest, ReluMatchesCpu) {
  auto x = RandomVector(7 * 11, rng_), dy = RandomVector(7 * 11, rng_);
  std::vector<float> y(x.size()), dx(x.size());
  ASSERT_TRUE(cpu_->ReluForward(ConstMatrixView(x.data(), 7, 11), MatrixView(y.data(), 7, 11)).ok());
  ASSERT_TRUE(cpu_->ReluBackward(ConstMatrixView(y.data(), 7, 11), ConstMatrixView(dy.data(), 7, 11),
                                 MatrixView(dx.data(), 7, 11)).ok());
  float* gx = Up(x);
  float* gy = Up(std::vector<float>(x.size()));
  float* gdy = Up(dy);
  float* gdx = Up(std::vector<float>(x.size()));
  ASSERT_TRUE(gpu_->ReluForward(ConstMatrixView(gx, 7, 11), MatrixView(gy, 7, 11)).ok());
  ASSERT_TRUE(gpu_->ReluBackward(ConstMatrixView(gy, 7, 11), ConstMatrixView(gdy, 7, 11),
                                 MatrixView(gdx, 7, 11)).ok());
  ExpectClose(Down(gy, y.size()), y, "relu y");
  ExpectClose(Down(gdx, dx.size()), dx, "relu dx");
}

TEST_F(CudaDeviceTest, EmbeddingBagMatchesCpu) {
  const int batch = 300, unique = 40, dim = 16, out_stride = 20;
  std::uniform_int_distribution<int> bag(0, 4), row(0, unique - 1);
  std::vector<uint32_t> index, offsets = {0};
  for (int b = 0; b < batch; ++b) {
    for (int k = bag(rng_); k > 0; --k) index.push_back(row(rng_));  // repeats: atomics
    offsets.push_back(static_cast<uint32_t>(index.size()));
  }
  auto rows = RandomVector(static_cast<size_t>(unique) * dim, rng_);
  auto out0 = RandomVector(static_cast<size_t>(batch) * out_stride, rng_);
  auto d_out = RandomVector(static_cast<size_t>(batch) * out_stride, rng_);
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    for (bool accumulate : {false, true}) {
      std::vector<float> out = out0, d_rows(rows.size(), 0.0f);
      Bags cbags{index.data(), offsets.data(), batch};
      ASSERT_TRUE(cpu_->EmbeddingBagForward(rows.data(), cbags, pooling, accumulate,
                                            MatrixView(out.data(), batch, dim, out_stride)).ok());
      ASSERT_TRUE(cpu_->EmbeddingBagBackward(ConstMatrixView(d_out.data(), batch, dim, out_stride),
                                             cbags, pooling, d_rows.data()).ok());
      Bags gbags{Up(index), Up(offsets), batch};
      float* gout = Up(out0);
      float* gd_rows = Up(std::vector<float>(rows.size(), 0.0f));
      ASSERT_TRUE(gpu_->EmbeddingBagForward(Up(rows), gbags, pooling, accumulate,
                                            MatrixView(gout, batch, dim, out_stride)).ok());
      ASSERT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(Up(d_out), batch, dim, out_stride),
                                             gbags, pooling, gd_rows).ok());
      ExpectClose(Down(gout, out.size()), out, "embedding bag out");
      ExpectClose(Down(gd_rows, d_rows.size()), d_rows, "embedding bag d_rows");
    }
  }
}

// DIN's four ops over bags that start mid-array (a chunk: offsets[0] > 0),
// with empty bags, repeated items (the backward's atomics) and strided
// views of 13 columns (not a multiple of any block).
TEST_F(CudaDeviceTest, AttentionPoolingMatchesCpu) {
  const int batch = 301, unique = 37, d = 13, stride = 17, skipped = 5;
  std::uniform_int_distribution<int> bag(0, 6), row(0, unique - 1);
  std::vector<uint32_t> index, offsets;
  for (int k = 0; k < skipped; ++k) index.push_back(row(rng_));  // rows before the chunk
  offsets.push_back(static_cast<uint32_t>(index.size()));
  for (int b = 0; b < batch; ++b) {
    for (int k = bag(rng_); k > 0; --k) index.push_back(row(rng_));
    offsets.push_back(static_cast<uint32_t>(index.size()));
  }
  const uint32_t first = offsets[0];
  const int items_n = static_cast<int>(offsets[batch] - first);
  auto items = RandomVector(static_cast<size_t>(unique) * d, rng_);
  auto target = RandomVector(static_cast<size_t>(batch) * stride, rng_);
  auto scores = RandomVector(items_n, rng_);
  auto d_out = RandomVector(static_cast<size_t>(batch) * stride, rng_);
  auto d_features = RandomVector(static_cast<size_t>(items_n) * 4 * d, rng_);
  // CPU.
  Bags cb{index.data(), offsets.data(), batch, offsets.data()};
  std::vector<float> features(static_cast<size_t>(items_n) * 4 * d), out(target.size(), 0.0f),
      d_scores(items_n), d_items(items.size(), 0.0f), d_target(target.size(), 0.0f);
  const ConstMatrixView ct(target.data(), batch, d, stride);
  ASSERT_TRUE(cpu_->AttentionFeatures(items.data(), cb, first, ct,
                                      MatrixView(features.data(), items_n, 4 * d)).ok());
  ASSERT_TRUE(cpu_->WeightedBagSum(items.data(), cb, first, scores.data(),
                                   MatrixView(out.data(), batch, d, stride)).ok());
  ASSERT_TRUE(cpu_->WeightedBagDot(ConstMatrixView(d_out.data(), batch, d, stride), items.data(),
                                   cb, first, d_scores.data()).ok());
  ASSERT_TRUE(cpu_->AttentionPoolingBackward(
      ConstMatrixView(d_out.data(), batch, d, stride),
      ConstMatrixView(d_features.data(), items_n, 4 * d), items.data(), cb, first, scores.data(),
      ct, d_items.data(), MatrixView(d_target.data(), batch, d, stride)).ok());
  // GPU.
  Bags gb{Up(index), Up(offsets), batch, offsets.data()};
  const float* g_items = Up(items);
  const ConstMatrixView gt(Up(target), batch, d, stride);
  float* g_features = Up(std::vector<float>(features.size(), 0.0f));
  float* g_out = Up(std::vector<float>(out.size(), 0.0f));
  float* g_d_scores = Up(std::vector<float>(d_scores.size(), 0.0f));
  float* g_d_items = Up(std::vector<float>(d_items.size(), 0.0f));
  float* g_d_target = Up(std::vector<float>(d_target.size(), 0.0f));
  const float* g_scores = Up(scores);
  const ConstMatrixView g_d_out(Up(d_out), batch, d, stride);
  ASSERT_TRUE(gpu_->AttentionFeatures(g_items, gb, first, gt,
                                      MatrixView(g_features, items_n, 4 * d)).ok());
  ASSERT_TRUE(gpu_->WeightedBagSum(g_items, gb, first, g_scores,
                                   MatrixView(g_out, batch, d, stride)).ok());
  ASSERT_TRUE(gpu_->WeightedBagDot(g_d_out, g_items, gb, first, g_d_scores).ok());
  ASSERT_TRUE(gpu_->AttentionPoolingBackward(
      g_d_out, ConstMatrixView(Up(d_features), items_n, 4 * d), g_items, gb, first, g_scores, gt,
      g_d_items, MatrixView(g_d_target, batch, d, stride)).ok());
  ExpectClose(Down(g_features, features.size()), features, "attention features");
  ExpectClose(Down(g_out, out.size()), out, "weighted bag sum");
  ExpectClose(Down(g_d_scores, d_scores.size()), d_scores, "d_scores");
  ExpectClose(Down(g_d_items, d_items.size()), d_items, "d_items");
  ExpectClose(Down(g_d_target, d_target.size()), d_target, "d_target");
}

// BST's six ops over bags that start mid-array, with empty bags, bags
// longer than the positions (they share the last), repeated items (the
// backward's atomics) and 3 heads of width 4 in views of stride 14.
TEST_F(CudaDeviceTest, SequenceAttentionMatchesCpu) {
  const int batch = 173, unique = 29, heads = 3, d = 12, stride = 14, max_length = 5,
            skipped = 4;
  std::uniform_int_distribution<int> bag(0, 9), row(0, unique - 1);
  std::vector<uint32_t> index, offsets;
  for (int k = 0; k < skipped; ++k) index.push_back(row(rng_));
  offsets.push_back(static_cast<uint32_t>(index.size()));
  int max_n = 1;
  for (int b = 0; b < batch; ++b) {
    const int n = bag(rng_);
    max_n = std::max(max_n, n);
    for (int k = n; k > 0; --k) index.push_back(row(rng_));
    offsets.push_back(static_cast<uint32_t>(index.size()));
  }
  const uint32_t first = offsets[0];
  const int n_items = static_cast<int>(offsets[batch] - first);
  const size_t per_item = static_cast<size_t>(n_items) * stride;
  auto items = RandomVector(static_cast<size_t>(unique) * d, rng_);
  auto positions = RandomVector(static_cast<size_t>(max_length) * d, rng_);
  auto q = RandomVector(per_item, rng_, -2.0f, 2.0f), k = RandomVector(per_item, rng_, -2.0f, 2.0f),
       v = RandomVector(per_item, rng_);
  auto d_heads = RandomVector(per_item, rng_);
  auto d_out = RandomVector(static_cast<size_t>(batch) * stride, rng_);
  auto y = RandomVector(per_item, rng_);
  const size_t n_weights = static_cast<size_t>(n_items) * heads * max_n;
  auto items_view = [&](float* p) { return MatrixView(p, n_items, d, stride); };
  // CPU.
  Bags cb{index.data(), offsets.data(), batch, offsets.data()};
  std::vector<float> x(per_item, 0.0f), weights(n_weights, 0.0f), heads_out(per_item, 0.0f),
      dq(per_item, 0.0f), dk(per_item, 0.0f), dv(per_item, 0.0f), dy(per_item, 0.0f),
      mean(static_cast<size_t>(batch) * stride, 0.0f), d_items(items.size(), 0.0f),
      d_positions(positions.size(), 0.0f);
  ASSERT_TRUE(cpu_->SequenceInputs(items.data(), cb, first, positions.data(), max_length,
                                   items_view(x.data())).ok());
  ASSERT_TRUE(cpu_->SequenceInputsBackward(items_view(d_heads.data()), cb, first, max_length,
                                           d_items.data(), d_positions.data()).ok());
  ASSERT_TRUE(cpu_->SequenceAttention(items_view(q.data()), items_view(k.data()),
                                      items_view(v.data()), cb, first, heads, max_n,
                                      weights.data(), items_view(heads_out.data())).ok());
  ASSERT_TRUE(cpu_->SequenceAttentionBackward(
      items_view(q.data()), items_view(k.data()), items_view(v.data()), weights.data(),
      items_view(d_heads.data()), cb, first, heads, max_n, items_view(dq.data()),
      items_view(dk.data()), items_view(dv.data())).ok());
  ASSERT_TRUE(cpu_->SequenceMean(items_view(y.data()), cb, first,
                                 MatrixView(mean.data(), batch, d, stride)).ok());
  ASSERT_TRUE(cpu_->SequenceMeanBackward(ConstMatrixView(d_out.data(), batch, d, stride), cb,
                                         first, items_view(dy.data())).ok());
  // GPU.
  Bags gb{Up(index), Up(offsets), batch, offsets.data()};
  auto zeros = [&](size_t n) { return Up(std::vector<float>(n, 0.0f)); };
  float *g_x = zeros(per_item), *g_weights = zeros(n_weights), *g_heads = zeros(per_item),
        *g_dq = zeros(per_item), *g_dk = zeros(per_item), *g_dv = zeros(per_item),
        *g_dy = zeros(per_item), *g_mean = zeros(mean.size()), *g_d_items = zeros(items.size()),
        *g_d_positions = zeros(positions.size());
  float *g_q = Up(q), *g_k = Up(k), *g_v = Up(v), *g_d_heads = Up(d_heads), *g_y = Up(y);
  ASSERT_TRUE(gpu_->SequenceInputs(Up(items), gb, first, Up(positions), max_length,
                                   items_view(g_x)).ok());
  ASSERT_TRUE(gpu_->SequenceInputsBackward(items_view(g_d_heads), gb, first, max_length,
                                           g_d_items, g_d_positions).ok());
  ASSERT_TRUE(gpu_->SequenceAttention(items_view(g_q), items_view(g_k), items_view(g_v), gb, first,
                                      heads, max_n, g_weights, items_view(g_heads)).ok());
  ASSERT_TRUE(gpu_->SequenceAttentionBackward(items_view(g_q), items_view(g_k), items_view(g_v),
                                              g_weights, items_view(g_d_heads), gb, first, heads,
                                              max_n, items_view(g_dq), items_view(g_dk),
                                              items_view(g_dv)).ok());
  ASSERT_TRUE(gpu_->SequenceMean(items_view(g_y), gb, first,
                                 MatrixView(g_mean, batch, d, stride)).ok());
  ASSERT_TRUE(gpu_->SequenceMeanBackward(ConstMatrixView(Up(d_out), batch, d, stride), gb, first,
                                         items_view(g_dy)).ok());
  ExpectClose(Down(g_x, per_item), x, "sequence inputs");
  ExpectClose(Down(g_d_items, items.size()), d_items, "d_items");
  ExpectClose(Down(g_d_positions, positions.size()), d_positions, "d_positions");
  ExpectClose(Down(g_weights, n_weights), weights, "attention weights");
  ExpectClose(Down(g_heads, per_item), heads_out, "heads' outputs");
  ExpectClose(Down(g_dq, per_item), dq, "dq");
  ExpectClose(Down(g_dk, per_item), dk, "dk");
  ExpectClose(Down(g_dv, per_item), dv, "dv");
  ExpectClose(Down(g_mean, mean.size()), mean, "mean");
  ExpectClose(Down(g_dy, per_item), dy, "d_y");
}

// Layer norm of 300 rows of 13 columns in views of stride 17, forward and
// backward, the gain's and bias's gradients overwritten then accumulated.
TEST_F(CudaDeviceTest, LayerNormMatchesCpu) {
  const int rows = 300, d = 13, stride = 17;
  auto x = RandomVector(static_cast<size_t>(rows) * stride, rng_, -3.0f, 3.0f);
  auto dy = RandomVector(static_cast<size_t>(rows) * stride, rng_);
  auto gain = RandomVector(d, rng_, 0.5f, 1.5f), bias = RandomVector(d, rng_);
  const size_t n = static_cast<size_t>(rows) * stride;
  std::vector<float> y(n, 0.0f), stats(2 * rows), dx(n, 0.0f), dgain(d), dbias(d);
  const ConstMatrixView cx(x.data(), rows, d, stride), cdy(dy.data(), rows, d, stride);
  ASSERT_TRUE(cpu_->LayerNormForward(cx, gain.data(), bias.data(),
                                     MatrixView(y.data(), rows, d, stride), stats.data()).ok());
  for (bool accumulate : {false, true}) {
    ASSERT_TRUE(cpu_->LayerNormBackward(cx, gain.data(), stats.data(), cdy,
                                        MatrixView(dx.data(), rows, d, stride), dgain.data(),
                                        dbias.data(), accumulate).ok());
  }
  float *g_y = Up(std::vector<float>(n, 0.0f)), *g_stats = Up(std::vector<float>(2 * rows, 0.0f)),
        *g_dx = Up(std::vector<float>(n, 0.0f)), *g_dgain = Up(std::vector<float>(d, 0.0f)),
        *g_dbias = Up(std::vector<float>(d, 0.0f));
  const float *g_gain = Up(gain), *g_bias = Up(bias);
  const ConstMatrixView gx(Up(x), rows, d, stride), gdy(Up(dy), rows, d, stride);
  ASSERT_TRUE(gpu_->LayerNormForward(gx, g_gain, g_bias, MatrixView(g_y, rows, d, stride), g_stats).ok());
  for (bool accumulate : {false, true}) {
    ASSERT_TRUE(gpu_->LayerNormBackward(gx, g_gain, g_stats, gdy, MatrixView(g_dx, rows, d, stride),
                                        g_dgain, g_dbias, accumulate).ok());
  }
  ExpectClose(Down(g_y, n), y, "layer norm");
  ExpectClose(Down(g_stats, 2 * rows), stats, "stats");
  ExpectClose(Down(g_dx, n), dx, "dx");
  ExpectClose(Down(g_dgain, d), dgain, "dgain");
  ExpectClose(Down(g_dbias, d), dbias, "dbias");
}

// A gate's softmax mix of 3 experts of width 7 over strided views.
TEST_F(CudaDeviceTest, ExpertMixMatchesCpu) {
  const int rows = 257, k = 3, width = 7, y_stride = 25, stride = 9;
  auto z = RandomVector(static_cast<size_t>(rows) * stride, rng_, -3.0f, 3.0f);
  auto y = RandomVector(static_cast<size_t>(rows) * y_stride, rng_);
  auto d_out = RandomVector(static_cast<size_t>(rows) * stride, rng_);
  std::vector<float> g(static_cast<size_t>(rows) * k), out(static_cast<size_t>(rows) * stride, 0.0f),
      dz(static_cast<size_t>(rows) * k), dy(static_cast<size_t>(rows) * y_stride, 0.0f);
  ASSERT_TRUE(cpu_->ExpertMixForward(ConstMatrixView(z.data(), rows, k, stride),
                                     ConstMatrixView(y.data(), rows, k * width, y_stride),
                                     MatrixView(g.data(), rows, k),
                                     MatrixView(out.data(), rows, width, stride)).ok());
  ASSERT_TRUE(cpu_->ExpertMixBackward(ConstMatrixView(g.data(), rows, k),
                                      ConstMatrixView(y.data(), rows, k * width, y_stride),
                                      ConstMatrixView(d_out.data(), rows, width, stride),
                                      MatrixView(dz.data(), rows, k),
                                      MatrixView(dy.data(), rows, k * width, y_stride)).ok());
  float* gg = Up(std::vector<float>(g.size(), 0.0f));
  float* gout = Up(std::vector<float>(out.size(), 0.0f));
  float* gdz = Up(std::vector<float>(dz.size(), 0.0f));
  float* gdy = Up(std::vector<float>(dy.size(), 0.0f));
  const float* gy = Up(y);
  ASSERT_TRUE(gpu_->ExpertMixForward(ConstMatrixView(Up(z), rows, k, stride),
                                     ConstMatrixView(gy, rows, k * width, y_stride),
                                     MatrixView(gg, rows, k), MatrixView(gout, rows, width, stride)).ok());
  ASSERT_TRUE(gpu_->ExpertMixBackward(ConstMatrixView(gg, rows, k),
                                      ConstMatrixView(gy, rows, k * width, y_stride),
                                      ConstMatrixView(Up(d_out), rows, width, stride),
                                      MatrixView(gdz, rows, k),
                                      MatrixView(gdy, rows, k * width, y_stride)).ok());
  ExpectClose(Down(gg, g.size()), g, "gate weights");
  ExpectClose(Down(gout, out.size()), out, "mix");
  ExpectClose(Down(gdz, dz.size()), dz, "dz");
  ExpectClose(Down(gdy, dy.size()), dy, "dy");
}

TEST_F(CudaDeviceTest, DotInteractionMatchesCpu) {
  struct Case {
    int batch, n, dim;
  };
  for (const Case c : {Case{37, 27, 16}, Case{5, 4, 3}, Case{64, 9, 32}}) {
    const int in_width = c.n * c.dim, width = InteractionOutputWidth(c.n, c.dim);
    auto t = RandomVector(static_cast<size_t>(c.batch) * in_width, rng_);
    auto dz = RandomVector(static_cast<size_t>(c.batch) * width, rng_);
    std::vector<float> z(dz.size()), dt(t.size());
    ASSERT_TRUE(cpu_->DotInteractionForward(ConstMatrixView(t.data(), c.batch, in_width), c.n, c.dim,
                                            MatrixView(z.data(), c.batch, width)).ok());
    ASSERT_TRUE(cpu_->DotInteractionBackward(ConstMatrixView(t.data(), c.batch, in_width),
                                             ConstMatrixView(dz.data(), c.batch, width), c.n, c.dim,
                                             MatrixView(dt.data(), c.batch, in_width)).ok());
    float* gt = Up(t);
    float* gz = Up(std::vector<float>(z.size()));
    float* gdt = Up(std::vector<float>(dt.size()));
    ASSERT_TRUE(gpu_->DotInteractionForward(ConstMatrixView(gt, c.batch, in_width), c.n, c.dim,
                                            MatrixView(gz, c.batch, width)).ok());
    ASSERT_TRUE(gpu_->DotInteractionBackward(ConstMatrixView(gt, c.batch, in_width),
                                             ConstMatrixView(Up(dz), c.batch, width), c.n, c.dim,
                                             MatrixView(gdt, c.batch, in_width)).ok());
    ExpectClose(Down(gz, z.size()), z, "interaction z");
    ExpectClose(Down(gdt, dt.size()), dt, "interaction dt");
  }
}

TEST_F(CudaDeviceTest, LossAndSigmoidMatchCpu) {
  const int n = 1000;
  auto logits = RandomVector(n, rng_, -30.0f, 30.0f);
  std::vector<float> labels(n), dlogits(n), probs(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 3 == 0 ? 1.0f : 0.0f;
  auto loss = cpu_->SigmoidBceLoss(logits.data(), labels.data(), n, dlogits.data());
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(cpu_->Sigmoid(logits.data(), n, probs.data()).ok());
  float* gl = Up(logits);
  float* gd = Up(std::vector<float>(n));
  float* gp = Up(std::vector<float>(n));
  auto gloss = gpu_->SigmoidBceLoss(gl, Up(labels), n, gd);
  ASSERT_TRUE(gloss.ok()) << gloss.status();
  ASSERT_TRUE(gpu_->Sigmoid(gl, n, gp).ok());
  EXPECT_NEAR(*gloss, *loss, 1e-4 * *loss);
  ExpectClose(Down(gd, n), dlogits, "dlogits");
  ExpectClose(Down(gp, n), probs, "probs");
}

TEST_F(CudaDeviceTest, CopyMatrixMatchesCpu) {
  auto src = RandomVector(6 * 10, rng_);
  std::vector<float> dst(6 * 12, 0.0f);
  ASSERT_TRUE(cpu_->CopyMatrix(ConstMatrixView(src.data() + 2, 6, 5, 10),
                               MatrixView(dst.data() + 3, 6, 5, 12)).ok());
  float* gdst = Up(std::vector<float>(6 * 12, 0.0f));
  ASSERT_TRUE(gpu_->CopyMatrix(ConstMatrixView(Up(src) + 2, 6, 5, 10), MatrixView(gdst + 3, 6, 5, 12)).ok());
  ExpectClose(Down(gdst, dst.size()), dst, "copy");
}

TEST_F(CudaDeviceTest, DropoutDropsTheCpusElementsOnStridedRows) {
  const int rows = 33, cols = 19, stride = 21;
  auto x = RandomVector(static_cast<size_t>(rows) * stride, rng_, 0.0f, 1.0f);
  auto dy = RandomVector(x.size(), rng_);
  std::vector<float> y = x, g = dy;
  ASSERT_TRUE(cpu_->DropoutForward(MatrixView(y.data(), rows, cols, stride), 0.3f, 123, 40).ok());
  ASSERT_TRUE(cpu_->DropoutBackward(ConstMatrixView(y.data(), rows, cols, stride),
                                    MatrixView(g.data(), rows, cols, stride), 0.3f).ok());
  float* gy = Up(x);
  float* gg = Up(dy);
  ASSERT_TRUE(gpu_->DropoutForward(MatrixView(gy, rows, cols, stride), 0.3f, 123, 40).ok());
  ASSERT_TRUE(gpu_->DropoutBackward(ConstMatrixView(gy, rows, cols, stride),
                                    MatrixView(gg, rows, cols, stride), 0.3f).ok());
  ExpectClose(Down(gy, y.size()), y, "dropout y");
  ExpectClose(Down(gg, g.size()), g, "dropout dy");
}

TEST_F(CudaDeviceTest, AddMatrixMatchesCpuOnStridedViews) {
  const int rows = 33, cols = 257, src_stride = 260, dst_stride = 259;
  auto src = RandomVector(static_cast<size_t>(rows) * src_stride, rng_);
  auto dst0 = RandomVector(static_cast<size_t>(rows) * dst_stride, rng_);
  std::vector<float> dst = dst0;
  ASSERT_TRUE(cpu_->AddMatrix(ConstMatrixView(src.data(), rows, cols, src_stride),
                              MatrixView(dst.data(), rows, cols, dst_stride)).ok());
  float* gdst = Up(dst0);
  ASSERT_TRUE(gpu_->AddMatrix(ConstMatrixView(Up(src), rows, cols, src_stride),
                              MatrixView(gdst, rows, cols, dst_stride)).ok());
  ExpectClose(Down(gdst, dst.size()), dst, "add");
}

TEST_F(CudaDeviceTest, CrossCombineMatchesCpuForwardAndBackward) {
  for (const int batch : {1, 37, 300}) {
    for (const bool accumulate : {false, true}) {
      const int width = 29;
      const size_t n = static_cast<size_t>(batch) * width;
      auto x0 = RandomVector(n, rng_), u = RandomVector(n, rng_), xl = RandomVector(n, rng_);
      auto g = RandomVector(n, rng_), dx0_init = RandomVector(n, rng_);
      std::vector<float> out(n), du(n), dx0 = dx0_init;
      ASSERT_TRUE(cpu_->CrossCombineForward(ConstMatrixView(x0.data(), batch, width),
                                            ConstMatrixView(u.data(), batch, width),
                                            ConstMatrixView(xl.data(), batch, width),
                                            MatrixView(out.data(), batch, width)).ok());
      ASSERT_TRUE(cpu_->CrossCombineBackward(ConstMatrixView(g.data(), batch, width),
                                             ConstMatrixView(x0.data(), batch, width),
                                             ConstMatrixView(u.data(), batch, width),
                                             MatrixView(du.data(), batch, width),
                                             MatrixView(dx0.data(), batch, width), accumulate).ok());
      float* gx0 = Up(x0);
      float* gu = Up(u);
      float* gout = Up(std::vector<float>(n));
      float* gdu = Up(std::vector<float>(n));
      float* gdx0 = Up(dx0_init);
      ASSERT_TRUE(gpu_->CrossCombineForward(ConstMatrixView(gx0, batch, width),
                                            ConstMatrixView(gu, batch, width),
                                            ConstMatrixView(Up(xl), batch, width),
                                            MatrixView(gout, batch, width)).ok());
      ASSERT_TRUE(gpu_->CrossCombineBackward(ConstMatrixView(Up(g), batch, width),
                                             ConstMatrixView(gx0, batch, width),
                                             ConstMatrixView(gu, batch, width),
                                             MatrixView(gdu, batch, width),
                                             MatrixView(gdx0, batch, width), accumulate).ok());
      const std::string what = "cross combine batch " + std::to_string(batch);
      ExpectClose(Down(gout, n), out, what + " out");
      ExpectClose(Down(gdu, n), du, what + " du");
      ExpectClose(Down(gdx0, n), dx0, what + " dx0");
    }
  }
}

TEST_F(CudaDeviceTest, FactorizationMachineMatchesCpuForwardAndBackward) {
  struct Case {
    int batch, n, dim;
  };
  for (const Case c : {Case{1, 3, 5}, Case{37, 26, 16}, Case{300, 7, 33}}) {
    for (const bool accumulate : {false, true}) {
      const int width = c.n * c.dim;
      auto t = RandomVector(static_cast<size_t>(c.batch) * width, rng_);
      auto dy = RandomVector(c.batch, rng_);
      auto out0 = RandomVector(c.batch, rng_), dt0 = RandomVector(t.size(), rng_);
      std::vector<float> out = out0, dt = dt0;
      ASSERT_TRUE(cpu_->FmForward(ConstMatrixView(t.data(), c.batch, width), c.n, c.dim, accumulate,
                                  MatrixView(out.data(), c.batch, 1)).ok());
      ASSERT_TRUE(cpu_->FmBackward(ConstMatrixView(t.data(), c.batch, width),
                                   ConstMatrixView(dy.data(), c.batch, 1), c.n, c.dim, accumulate,
                                   MatrixView(dt.data(), c.batch, width)).ok());
      float* gt = Up(t);
      float* gout = Up(out0);
      float* gdt = Up(dt0);
      ASSERT_TRUE(gpu_->FmForward(ConstMatrixView(gt, c.batch, width), c.n, c.dim, accumulate,
                                  MatrixView(gout, c.batch, 1)).ok());
      ASSERT_TRUE(gpu_->FmBackward(ConstMatrixView(gt, c.batch, width),
                                   ConstMatrixView(Up(dy), c.batch, 1), c.n, c.dim, accumulate,
                                   MatrixView(gdt, c.batch, width)).ok());
      const std::string what = "fm " + std::to_string(c.n) + "x" + std::to_string(c.dim);
      ExpectClose(Down(gout, out.size()), out, what + " out");
      ExpectClose(Down(gdt, dt.size()), dt, what + " dt");
    }
  }
}

TEST_F(CudaDeviceTest, OddShapesAndABatchOfOneMatchCpu) {
  // Sizes around the 256-thread block: one short of it, one past it.
  struct Case {
    int batch, in, out;
  };
  for (const Case c : {Case{1, 1, 1}, Case{1, 255, 257}, Case{257, 129, 33}, Case{255, 7, 1}}) {
    auto x = RandomVector(static_cast<size_t>(c.batch) * c.in, rng_);
    auto w = RandomVector(static_cast<size_t>(c.out) * c.in, rng_);
    auto b = RandomVector(c.out, rng_);
    auto r = RandomVector(static_cast<size_t>(c.batch) * c.out, rng_);
    std::vector<float> y(r.size()), dy = r, dw(w.size()), db(b.size()), dx(x.size());
    ConstMatrixView xv(x.data(), c.batch, c.in);
    ASSERT_TRUE(cpu_->LinearForward(xv, w.data(), b.data(), Activation::kRelu,
                                    MatrixView(y.data(), c.batch, c.out)).ok());
    ASSERT_TRUE(cpu_->LinearBackward(xv, w.data(), ConstMatrixView(y.data(), c.batch, c.out),
                                     Activation::kRelu, MatrixView(dy.data(), c.batch, c.out),
                                     dw.data(), db.data(), MatrixView(dx.data(), c.batch, c.in),
                                     false).ok());
    float* gx = Up(x);
    float* gw = Up(w);
    float* gy = Up(std::vector<float>(y.size()));
    float* gdy = Up(r);
    float* gdw = Up(std::vector<float>(w.size()));
    float* gdb = Up(std::vector<float>(b.size()));
    float* gdx = Up(std::vector<float>(dx.size()));
    ConstMatrixView gxv(gx, c.batch, c.in);
    ASSERT_TRUE(gpu_->LinearForward(gxv, gw, Up(b), Activation::kRelu,
                                    MatrixView(gy, c.batch, c.out)).ok());
    ASSERT_TRUE(gpu_->LinearBackward(gxv, gw, ConstMatrixView(gy, c.batch, c.out),
                                     Activation::kRelu, MatrixView(gdy, c.batch, c.out), gdw, gdb,
                                     MatrixView(gdx, c.batch, c.in), false).ok());
    const std::string what = "linear " + std::to_string(c.batch) + "x" + std::to_string(c.in) +
                             "->" + std::to_string(c.out);
    ExpectClose(Down(gy, y.size()), y, what + " y");
    ExpectClose(Down(gdw, dw.size()), dw, what + " dw");
    ExpectClose(Down(gdb, db.size()), db, what + " db");
    ExpectClose(Down(gdx, dx.size()), dx, what + " dx");
  }
  // An embedding bag of dim 7 (not a multiple of a warp) with one row, and
  // with one id repeated in every bag (the backward's atomics all collide).
  const int dim = 7;
  auto rows = RandomVector(3 * dim, rng_);
  for (const int batch : {1, 513}) {
    std::vector<uint32_t> index, offsets = {0};
    for (int r = 0; r < batch; ++r) {
      index.insert(index.end(), {1, 1, 2});
      offsets.push_back(static_cast<uint32_t>(index.size()));
    }
    auto d_out = RandomVector(static_cast<size_t>(batch) * dim, rng_);
    std::vector<float> out(d_out.size()), d_rows(rows.size(), 0.0f);
    Bags cbags{index.data(), offsets.data(), batch};
    ASSERT_TRUE(cpu_->EmbeddingBagForward(rows.data(), cbags, Pooling::kSum, false,
                                          MatrixView(out.data(), batch, dim)).ok());
    ASSERT_TRUE(cpu_->EmbeddingBagBackward(ConstMatrixView(d_out.data(), batch, dim), cbags,
                                           Pooling::kSum, d_rows.data()).ok());
    Bags gbags{Up(index), Up(offsets), batch};
    float* gout = Up(std::vector<float>(out.size()));
    float* gd_rows = Up(std::vector<float>(rows.size(), 0.0f));
    ASSERT_TRUE(gpu_->EmbeddingBagForward(Up(rows), gbags, Pooling::kSum, false,
                                          MatrixView(gout, batch, dim)).ok());
    ASSERT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(Up(d_out), batch, dim), gbags,
                                           Pooling::kSum, gd_rows).ok());
    ExpectClose(Down(gout, out.size()), out, "bag out, batch " + std::to_string(batch));
    // 2 x batch additions into row 1: float sums in another order.
    ExpectClose(Down(gd_rows, d_rows.size()), d_rows, "bag d_rows, batch " + std::to_string(batch),
                1e-3);
  }
}

TEST_F(CudaDeviceTest, AnEmptyBatchIsANoOpOnEveryOp) {
  // Zero rows: no kernel may be launched with zero blocks (an error), and
  // nothing is written.
  std::vector<float> sentinel(64, 7.0f);
  float* g = Up(sentinel);
  float* w = Up(RandomVector(4 * 3, rng_));
  float* b = Up(RandomVector(4, rng_));
  const uint32_t offsets[] = {0};
  Bags bags{Up(std::vector<uint32_t>{0}), Up(std::vector<uint32_t>(offsets, offsets + 1)), 0};
  EXPECT_TRUE(gpu_->LinearForward(ConstMatrixView(g, 0, 3), w, b, Activation::kRelu,
                                  MatrixView(g, 0, 4)).ok());
  EXPECT_TRUE(gpu_->LinearBackward(ConstMatrixView(g, 0, 3), w, ConstMatrixView(g, 0, 4),
                                   Activation::kRelu, MatrixView(g, 0, 4), g + 32, g + 48,
                                   MatrixView(g, 0, 3), /*accumulate=*/true).ok());
  EXPECT_TRUE(gpu_->ReluForward(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->EmbeddingBagForward(w, bags, Pooling::kMean, false, MatrixView(g, 0, 3)).ok());
  EXPECT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(g, 0, 3), bags, Pooling::kSum, g).ok());
  EXPECT_TRUE(gpu_->DotInteractionForward(ConstMatrixView(g, 0, 6), 2, 3, MatrixView(g, 0, 4)).ok());
  EXPECT_TRUE(gpu_->CopyMatrix(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->AddMatrix(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->FmForward(ConstMatrixView(g, 0, 6), 2, 3, false, MatrixView(g, 0, 1)).ok());
  EXPECT_TRUE(gpu_->DropoutForward(MatrixView(g, 0, 5), 0.5f, 1, 0).ok());
  auto loss = gpu_->SigmoidBceLoss(g, g, 0, g);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(*loss, 0.0);
  EXPECT_TRUE(gpu_->Sigmoid(g, 0, g).ok());
  ASSERT_TRUE(gpu_->Synchronize().ok());
  // Nothing was written: every view had zero rows.
  std::vector<float> back = Down(g, sentinel.size());
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(back[i], 7.0f) << i;
}

TEST_F(CudaDeviceTest, AnAllocationTooLargeIsAStatusNamingTheCall) {
  // More than any GPU holds: cudaMalloc fails, the process goes on.
  auto p = gpu_->Allocate(size_t{1} << 50);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
  EXPECT_NE(p.status().message().find("cudaMalloc"), std::string::npos) << p.status();
  // The device still works after the error.
  std::vector<float> x = {1, -2, 3};
  float* gx = Up(x);
  float* gy = Up(std::vector<float>(3));
  ASSERT_TRUE(gpu_->ReluForward(ConstMatrixView(gx, 1, 3), MatrixView(gy, 1, 3)).ok());
  EXPECT_EQ(Down(gy, 3), (std::vector<float>{1, 0, 3}));
}

// Whole steps: a model on "cuda" and one on "cpu" with the same parameters.
}  // namespace
}  // namespace pstrain::worker::nn
