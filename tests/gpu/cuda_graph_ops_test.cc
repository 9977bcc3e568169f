// The CUDA device against the CPU reference for the ops of a model file's
// layers: DIN's attention pooling, BST's sequence attention, layer norm and
// a gate's expert mix, forward and backward, on bags that start mid-array,
// empty bags, repeated items (the backward's atomics) and strided views.
// Label gpu; skipped, naming why, where no GPU is available. Agreement as
// in cuda_device_test.cc: |gpu - cpu| <= 1e-4 (1 + |cpu|) per element.
#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/device.h"
#include "tests/gpu/cuda_device_fixture.h"
#include "tests/gpu/expect_close.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::RandomVector;

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
                                   ConstMatrixView(), items_view(x.data())).ok());
  ASSERT_TRUE(cpu_->SequenceInputsBackward(items_view(d_heads.data()), cb, first, max_length,
                                           d_items.data(), d_positions.data(), MatrixView()).ok());
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
                                   ConstMatrixView(), items_view(g_x)).ok());
  ASSERT_TRUE(gpu_->SequenceInputsBackward(items_view(g_d_heads), gb, first, max_length,
                                           g_d_items, g_d_positions, MatrixView()).ok());
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

// BST's inputs with the candidate appended to each bag (the most recent,
// position 0), over bags that start mid-array, empty bags and bags longer
// than the positions; the target and its gradient in views of stride 15.
TEST_F(CudaDeviceTest, SequenceInputsWithATargetMatchCpu) {
  const int batch = 171, unique = 23, d = 12, stride = 14, t_stride = 15, max_length = 4;
  std::uniform_int_distribution<int> bag(0, 7), row(0, unique - 1);
  std::vector<uint32_t> index = {3, 1}, offsets = {2};
  for (int b = 0; b < batch; ++b) {
    for (int k = bag(rng_); k > 0; --k) index.push_back(row(rng_));
    offsets.push_back(static_cast<uint32_t>(index.size()));
  }
  const uint32_t first = offsets[0];
  const int rows = static_cast<int>(offsets[batch] - first) + batch;  // the items and a target each
  auto items = RandomVector(static_cast<size_t>(unique) * d, rng_);
  auto positions = RandomVector(static_cast<size_t>(max_length) * d, rng_);
  auto target = RandomVector(static_cast<size_t>(batch) * t_stride, rng_);
  auto dx = RandomVector(static_cast<size_t>(rows) * stride, rng_);
  std::vector<float> x(static_cast<size_t>(rows) * stride, 0.0f), d_items(items.size(), 0.0f),
      d_positions(positions.size(), 0.0f), d_target(target.size(), 0.0f);
  Bags cb{index.data(), offsets.data(), batch, offsets.data()};
  ASSERT_TRUE(cpu_->SequenceInputs(items.data(), cb, first, positions.data(), max_length,
                                   ConstMatrixView(target.data(), batch, d, t_stride),
                                   MatrixView(x.data(), rows, d, stride)).ok());
  ASSERT_TRUE(cpu_->SequenceInputsBackward(ConstMatrixView(dx.data(), rows, d, stride), cb, first,
                                           max_length, d_items.data(), d_positions.data(),
                                           MatrixView(d_target.data(), batch, d, t_stride)).ok());
  Bags gb{Up(index), Up(offsets), batch, offsets.data()};
  float *g_x = Up(std::vector<float>(x.size(), 0.0f)), *g_d_items = Up(std::vector<float>(items.size(), 0.0f)),
        *g_d_positions = Up(std::vector<float>(positions.size(), 0.0f)),
        *g_d_target = Up(std::vector<float>(target.size(), 0.0f));
  ASSERT_TRUE(gpu_->SequenceInputs(Up(items), gb, first, Up(positions), max_length,
                                   ConstMatrixView(Up(target), batch, d, t_stride),
                                   MatrixView(g_x, rows, d, stride)).ok());
  ASSERT_TRUE(gpu_->SequenceInputsBackward(ConstMatrixView(Up(dx), rows, d, stride), gb, first,
                                           max_length, g_d_items, g_d_positions,
                                           MatrixView(g_d_target, batch, d, t_stride)).ok());
  ExpectClose(Down(g_x, x.size()), x, "sequence inputs with a target");
  ExpectClose(Down(g_d_items, items.size()), d_items, "d_items");
  ExpectClose(Down(g_d_positions, positions.size()), d_positions, "d_positions");
  ExpectClose(Down(g_d_target, target.size()), d_target, "d_target");
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

}  // namespace
}  // namespace pstrain::worker::nn
