// The dense layer ops (Linear, LayerStack, ReLU, dropout, concat, DLRM's
// interaction, FM, the cross layer, layer norm, the loss) against central
// differences of a double forward (double_reference.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/concat.h"
#include "model/nn/cpu_device.h"
#include "model/nn/dropout.h"
#include "model/nn/feature_cross.h"
#include "model/nn/interaction.h"
#include "model/nn/layer_norm.h"
#include "model/nn/layer_stack.h"
#include "model/nn/linear.h"
#include "model/nn/loss.h"
#include "model/nn/tensor.h"
#include "tests/model/nn/double_reference.h"

namespace pstrain::worker::nn::testing {
namespace {

// ---- double references, from the headers' definitions ----

// act(x W^T + b): x [rows x in], W [out x in]; `pre` gets x W^T + b.
Vec RefLinear(const Vec& x, const Vec& w, const Vec& b, int rows, int in, int out, bool relu,
              Vec* pre = nullptr) {
  Vec y(static_cast<size_t>(rows) * out);
  if (pre != nullptr) pre->resize(y.size());
  for (int r = 0; r < rows; ++r) {
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      if (pre != nullptr) (*pre)[r * out + o] = s;
      y[r * out + o] = relu ? std::max(s, 0.0) : s;
    }
  }
  return y;
}

// Inverted dropout of a dense [rows x cols] y with the header's mask
// (DropoutKeep is the mask's definition, a hash: a copy here would add nothing).
Vec RefDropout(Vec y, int cols, float rate, uint64_t seed, int64_t first_row) {
  for (size_t e = 0; e < y.size(); ++e) {
    const bool keep = DropoutKeep(seed, static_cast<uint64_t>(first_row) * cols + e, rate);
    y[e] = keep ? y[e] / (1.0 - rate) : 0.0;
  }
  return y;
}

// A LayerStack of ReLU hidden layers, each followed by dropout, and a linear
// last layer. `pre` gets each layer's pre-activation.
Vec RefStack(const Vec& x, const std::vector<Vec>& w, const std::vector<Vec>& b,
             const std::vector<int>& dims, int rows, const DropoutRun& dropout, uint64_t salt,
             std::vector<Vec>* pre = nullptr) {
  const size_t layers = dims.size() - 1;
  Vec y = x, p;
  for (size_t i = 0; i < layers; ++i) {
    const bool hidden = i + 1 < layers;
    y = RefLinear(y, w[i], b[i], rows, dims[i], dims[i + 1], hidden, &p);
    if (pre != nullptr) pre->push_back(p);
    if (hidden && dropout.rate > 0.0f) {  // layer_stack.cc salts the seed per layer
      const uint64_t seed = DropoutMix(dropout.seed ^ DropoutMix(salt + i));
      y = RefDropout(y, dims[i + 1], dropout.rate, seed, dropout.first_row);
    }
  }
  return y;
}

// [t_0 | <t_i, t_j> for i = 1.., j < i] per row.
Vec RefDotInteraction(const Vec& t, int rows, int n, int dim) {
  Vec z;
  for (int r = 0; r < rows; ++r) {
    const double* tr = &t[static_cast<size_t>(r) * n * dim];
    z.insert(z.end(), tr, tr + dim);
    for (int i = 1; i < n; ++i) {
      for (int j = 0; j < i; ++j) {
        double s = 0.0;
        for (int k = 0; k < dim; ++k) s += tr[i * dim + k] * tr[j * dim + k];
        z.push_back(s);
      }
    }
  }
  return z;
}

// gain (x - mean) / sqrt(var + eps) + bias per row (population variance);
// `stats` gets each row's mean and 1 / sqrt(var + eps).
Vec RefLayerNorm(const Vec& x, const Vec& gain, const Vec& bias, int rows, int d,
                 Vec* stats = nullptr) {
  Vec y(x.size());
  for (int r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (int c = 0; c < d; ++c) mean += x[r * d + c] / d;
    for (int c = 0; c < d; ++c) var += (x[r * d + c] - mean) * (x[r * d + c] - mean) / d;
    const double rstd = 1.0 / std::sqrt(var + static_cast<double>(kLayerNormEps));
    for (int c = 0; c < d; ++c) y[r * d + c] = gain[c] * (x[r * d + c] - mean) * rstd + bias[c];
    if (stats != nullptr) stats->insert(stats->end(), {mean, rstd});
  }
  return y;
}

// ---- the checks ----

TEST_F(DoubleReference, LinearGradientsMatchOnStridedViews) {
  std::mt19937 rng(11);
  const int rows = 5, in = 6;
  for (const int out : {4, 1}) {  // 1: the matrix-vector path
    for (const Activation act : {Activation::kNone, Activation::kRelu}) {
      const bool relu = act == Activation::kRelu, has_bias = !(relu && out == 1);
      const std::string tag = std::string("Linear ") + (relu ? "relu" : "none") +
                              (has_bias ? "" : " no-bias") + " out=" + std::to_string(out) + " ";
      Vec x, w, b, pre;
      do {
        x = Draw(rows * in, rng);
        w = Draw(out * in, rng);
        b = has_bias ? Draw(out, rng) : Vec(out, 0.0);
        RefLinear(x, w, b, rows, in, out, false, &pre);
      } while (relu && !ClearOfKinks(pre));
      const Vec g = Draw(rows * out, rng);
      auto loss = [&] { return Dot(g, RefLinear(x, w, b, rows, in, out, relu)); };
      Strided xs(rows, in, 3, x), y(rows, out, 2), dy(rows, out, 1, g), dx(rows, in, 2);
      const std::vector<float> wf = F(w), bf = F(b);
      LinearForward(xs.view(), wf.data(), has_bias ? bf.data() : nullptr, act, y.view());
      ExpectForwardMatches(tag + "y", y.Get(), RefLinear(x, w, b, rows, in, out, relu));
      std::vector<float> dw(w.size()), db(b.size());
      LinearBackward(xs.view(), wf.data(), y.view(), act, dy.view(), dw.data(),
                     has_bias ? db.data() : nullptr, dx.view());
      ExpectMatchesDoubleDifferences(tag + "dx", x, loss, dx.Get());
      ExpectMatchesDoubleDifferences(tag + "dw", w, loss, dw);
      if (has_bias) ExpectMatchesDoubleDifferences(tag + "db", b, loss, db);
    }
  }
}

TEST_F(DoubleReference, LayerStackGradientsMatchWithAndWithoutDropout) {
  std::unique_ptr<Device> device = CreateCpuDevice();
  std::mt19937 rng(13);
  const std::vector<int> dims = {5, 8, 6, 3};
  const int rows = 6, layers = static_cast<int>(dims.size()) - 1;
  constexpr uint64_t kSalt = 17;
  for (const float rate : {0.0f, 0.3f}) {
    const DropoutRun dropout{rate, 99, 4};  // a chunk of rows starting at row 4
    const std::string tag = rate > 0 ? "Stack dropout " : "Stack ";
    std::vector<LinearSpec> specs;
    std::vector<Vec> w, b;
    for (int i = 0; i < layers; ++i) {
      const Activation act = i + 1 < layers ? Activation::kRelu : Activation::kNone;
      const uint32_t id = 2 * i;
      specs.push_back(LinearSpec{dims[i], dims[i + 1], act, id, id + 1});
      w.push_back(Draw(dims[i + 1] * dims[i], rng));
      b.push_back(Draw(dims[i + 1], rng));
    }
    Vec x = Draw(rows * dims[0], rng);
    // Redraw the first layer with a pre-activation near a kink until none has.
    for (;;) {
      std::vector<Vec> pre;
      RefStack(x, w, b, dims, rows, dropout, kSalt, &pre);
      int bad = 0;
      while (bad + 1 < layers && ClearOfKinks(pre[bad])) ++bad;
      if (bad + 1 == layers) break;
      w[bad] = Draw(w[bad].size(), rng);
      b[bad] = Draw(b[bad].size(), rng);
    }
    const Vec g = Draw(rows * dims.back(), rng);
    auto loss = [&] { return Dot(g, RefStack(x, w, b, dims, rows, dropout, kSalt)); };
    std::vector<std::vector<float>> pf, df;  // weights and biases, interleaved
    std::vector<const float*> params;
    std::vector<float*> grads;
    for (int i = 0; i < 2 * layers; ++i) {  // (moving a vector keeps its data)
      pf.push_back(F(i % 2 == 0 ? w[i / 2] : b[i / 2]));
      df.emplace_back(pf.back().size());
      params.push_back(pf.back().data());
      grads.push_back(df.back().data());
    }
    LayerStack stack(specs, nullptr, kSalt);
    StackActivations acts;
    Strided xs(rows, dims[0], 3, x), out(rows, dims.back(), 2), d_out(rows, dims.back(), 1, g),
        dx(rows, dims[0], 2);
    ASSERT_TRUE(stack.Forward(*device, xs.view(), params, &acts, out.view(), dropout).ok());
    ExpectForwardMatches(tag + "y", out.Get(), RefStack(x, w, b, dims, rows, dropout, kSalt));
    ASSERT_TRUE(stack
                    .Backward(*device, xs.view(), params, acts, out.view(), d_out.view(), grads,
                              dx.view(), false)
                    .ok());
    ExpectMatchesDoubleDifferences(tag + "dx", x, loss, dx.Get());
    for (int i = 0; i < layers; ++i) {
      ExpectMatchesDoubleDifferences(tag + "dw" + std::to_string(i), w[i], loss, df[2 * i]);
      ExpectMatchesDoubleDifferences(tag + "db" + std::to_string(i), b[i], loss, df[2 * i + 1]);
    }
  }
}

// ReluForward, then DropoutForward (rate 0: keeps all), and their backward
// in place (dx = dy): DropoutBackward's contract is a ReLU'd input.
// BiasActivation and its backward are LinearForward/LinearBackward's.
TEST_F(DoubleReference, ReluAndDropoutGradientsMatch) {
  std::mt19937 rng(14);
  const int rows = 6, cols = 7;
  const uint64_t seed = 1234;
  const int64_t first_row = 9;  // a chunk of rows
  for (const float rate : {0.0f, 0.4f}) {
    const std::string tag = rate > 0 ? "Relu+Dropout " : "Relu ";
    Vec x = DrawClear(rows * cols, rng);
    const Vec g = Draw(rows * cols, rng);
    auto ref = [&] {
      Vec y = x;
      for (double& e : y) e = std::max(e, 0.0);
      return RefDropout(y, cols, rate, seed, first_row);
    };
    Strided xs(rows, cols, 1, x), y(rows, cols, 2), d(rows, cols, 3, g);
    ReluForward(xs.view(), y.view());
    DropoutForward(y.view(), rate, seed, first_row);
    const std::vector<float> yf = y.Get();
    ExpectForwardMatches(tag + "y", yf, ref());
    int dropped = 0;  // with a rate, the mask must matter
    for (size_t e = 0; e < x.size(); ++e) dropped += x[e] > 0 && yf[e] == 0.0f;
    EXPECT_EQ(dropped > 0, rate > 0);
    DropoutBackward(y.view(), d.view(), rate);
    ReluBackward(y.view(), d.view(), d.view());
    ExpectMatchesDoubleDifferences(
        tag + "dx", x, [&] { return Dot(g, ref()); }, d.Get());
  }
}

TEST_F(DoubleReference, ConcatGradientsMatchOnStridedParts) {
  std::mt19937 rng(15);
  const int rows = 4, width = 8;
  const std::vector<int> widths = {3, 1, 4};
  std::vector<Vec> parts;
  std::vector<Strided> in, d_in;
  std::vector<ConstMatrixView> views;
  std::vector<MatrixView> d_views;
  for (size_t i = 0; i < widths.size(); ++i) {  // (moving a Strided keeps its data)
    parts.push_back(Draw(rows * widths[i], rng));
    views.push_back(in.emplace_back(rows, widths[i], 1 + static_cast<int>(i), parts[i]).view());
    d_views.push_back(d_in.emplace_back(rows, widths[i], 2).view());
  }
  auto ref = [&] {
    Vec out;
    for (int r = 0; r < rows; ++r) {
      for (size_t i = 0; i < parts.size(); ++i) {
        out.insert(out.end(), &parts[i][r * widths[i]], &parts[i][r * widths[i]] + widths[i]);
      }
    }
    return out;
  };
  const Vec g = Draw(rows * width, rng);
  Strided out(rows, width, 3), d_out(rows, width, 1, g);
  ConcatForward(views, out.view());
  ExpectForwardMatches("Concat y", out.Get(), ref());
  ConcatBackward(d_out.view(), d_views);
  for (size_t i = 0; i < widths.size(); ++i) {
    ExpectMatchesDoubleDifferences(
        "Concat d_part" + std::to_string(i), parts[i], [&] { return Dot(g, ref()); },
        d_in[i].Get());
  }
}

TEST_F(DoubleReference, DotInteractionGradientsMatchOnPartialTiles) {
  std::mt19937 rng(17);
  struct Shape {
    int rows, n, dim;
  };
  // 11 rows: a full tile of 8 and a partial one; n = 10 reaches the 8-wide
  // dot blocks; dim = 8 the 8-wide column blocks of the tile transposes.
  for (const Shape s : {Shape{11, 10, 5}, Shape{3, 4, 8}}) {
    const std::string tag = "Dot n=" + std::to_string(s.n) + " ";
    const int width = InteractionOutputWidth(s.n, s.dim);
    Vec t = Draw(s.rows * s.n * s.dim, rng);
    const Vec g = Draw(s.rows * width, rng);
    auto ref = [&] { return RefDotInteraction(t, s.rows, s.n, s.dim); };
    Strided ts(s.rows, s.n * s.dim, 3, t), z(s.rows, width, 2), dz(s.rows, width, 1, g),
        dt(s.rows, s.n * s.dim, 2);
    DotInteractionForward(ts.view(), s.n, s.dim, z.view());
    ExpectForwardMatches(tag + "z", z.Get(), ref());
    DotInteractionBackward(ts.view(), dz.view(), s.n, s.dim, dt.view());
    ExpectMatchesDoubleDifferences(
        tag + "dt", t, [&] { return Dot(g, ref()); }, dt.Get());
  }
}

TEST_F(DoubleReference, FmGradientsMatchOnStridedViews) {
  std::mt19937 rng(18);
  const int rows = 5, n = 4, dim = 3;
  Vec t = Draw(rows * n * dim, rng);
  const Vec g = Draw(rows, rng);
  // sum_{i<j} <t_i, t_j>: the pair columns of the dot interaction, summed.
  auto ref = [&] {
    const Vec z = RefDotInteraction(t, rows, n, dim);
    const int width = static_cast<int>(z.size()) / rows;
    Vec fm(rows, 0.0);
    for (int e = 0; e < rows * width; ++e) fm[e / width] += e % width >= dim ? z[e] : 0.0;
    return fm;
  };
  Strided ts(rows, n * dim, 2, t), out(rows, 1, 2), dy(rows, 1, 3, g), dt(rows, n * dim, 1);
  FmForward(ts.view(), n, dim, false, out.view());
  ExpectForwardMatches("Fm y", out.Get(), ref());
  FmBackward(ts.view(), dy.view(), n, dim, false, dt.view());
  ExpectMatchesDoubleDifferences(
      "Fm dt", t, [&] { return Dot(g, ref()); }, dt.Get());
}

// A DCN-v2 cross layer's rest: out = x0 * u + xl, plus a residual r added by
// AddMatrix; the xl and r gradients are dL/dout itself (the caller's).
TEST_F(DoubleReference, CrossCombineGradientsMatchOnStridedViews) {
  std::mt19937 rng(19);
  const int rows = 4, cols = 6, n = rows * cols;
  Vec x0 = Draw(n, rng), u = Draw(n, rng), xl = Draw(n, rng), r = Draw(n, rng);
  const Vec g = Draw(n, rng);
  auto ref = [&] {
    Vec out(n);
    for (int e = 0; e < n; ++e) out[e] = x0[e] * u[e] + xl[e] + r[e];
    return out;
  };
  auto loss = [&] { return Dot(g, ref()); };
  Strided x0s(rows, cols, 1, x0), us(rows, cols, 2, u), xls(rows, cols, 3, xl),
      rs(rows, cols, 1, r), out(rows, cols, 2), gs(rows, cols, 1, g), du(rows, cols, 3),
      dx0(rows, cols, 2);
  CrossCombineForward(x0s.view(), us.view(), xls.view(), out.view());
  AddMatrix(rs.view(), out.view());
  ExpectForwardMatches("Cross y", out.Get(), ref());
  CrossCombineBackward(gs.view(), x0s.view(), us.view(), du.view(), dx0.view(), false);
  ExpectMatchesDoubleDifferences("Cross dx0", x0, loss, dx0.Get());
  ExpectMatchesDoubleDifferences("Cross du", u, loss, du.Get());
  ExpectMatchesDoubleDifferences("Cross dxl", xl, loss, gs.Get());
  ExpectMatchesDoubleDifferences("AddMatrix dsrc", r, loss, gs.Get());
}

TEST_F(DoubleReference, LayerNormGradientsMatchOnStridedViews) {
  std::mt19937 rng(25);
  const int rows = 5, d = 7;
  Vec x = Draw(rows * d, rng, 1.0f, 3.0f);  // off-centre: the mean matters
  Vec gain = Draw(d, rng, 0.5f, 1.5f), bias = Draw(d, rng), stats;
  const Vec g = Draw(rows * d, rng);
  Strided xs(rows, d, 3, x), y(rows, d, 1), dy(rows, d, 2, g), dx(rows, d, 1);
  const std::vector<float> gain_f = F(gain), bias_f = F(bias);
  std::vector<float> stats_f(2 * rows), dgain(d), dbias(d);
  LayerNormForward(xs.view(), gain_f.data(), bias_f.data(), y.view(), stats_f.data());
  ExpectForwardMatches("LayerNorm y", y.Get(), RefLayerNorm(x, gain, bias, rows, d, &stats));
  ExpectForwardMatches("LayerNorm stats", stats_f, stats);
  LayerNormBackward(xs.view(), gain_f.data(), stats_f.data(), dy.view(), dx.view(), dgain.data(),
                    dbias.data(), false);
  auto loss = [&] { return Dot(g, RefLayerNorm(x, gain, bias, rows, d)); };
  ExpectMatchesDoubleDifferences("LayerNorm dx", x, loss, dx.Get());
  ExpectMatchesDoubleDifferences("LayerNorm dgain", gain, loss, dgain);
  ExpectMatchesDoubleDifferences("LayerNorm dbias", bias, loss, dbias);
}

// The loss is the op's output itself: L = sum_i BCE(sigmoid(z_i), y_i).
TEST_F(DoubleReference, SigmoidBceGradientsMatchForLargeLogits) {
  Vec z = {-30.0, -12.5, -3.0, -0.4, 0.07, 0.9, 4.0, 15.0, 30.0};
  const std::vector<float> labels = {0.0f, 1.0f, 0.3f, 1.0f, 0.0f, 0.5f, 1.0f, 0.0f, 1.0f};
  const int n = static_cast<int>(z.size());
  auto loss = [&] {
    double sum = 0.0;
    for (int i = 0; i < n; ++i) {
      // -y log p - (1 - y) log(1 - p), p = sigmoid(z), arranged not to overflow.
      sum += std::max(z[i], 0.0) - z[i] * labels[i] + std::log1p(std::exp(-std::abs(z[i])));
    }
    return sum;
  };
  const std::vector<float> zf = F(z);
  std::vector<float> dz(n), probs(n);
  const double got = SigmoidBceLoss(zf.data(), labels.data(), n, dz.data());
  EXPECT_NEAR(got, loss(), kForwardTol * (1.0 + std::abs(loss())));
  Sigmoid(zf.data(), n, probs.data());
  Vec want_probs;
  for (const double v : z) want_probs.push_back(1.0 / (1.0 + std::exp(-v)));
  ExpectForwardMatches("Sigmoid p", probs, want_probs);
  ExpectMatchesDoubleDifferences("SigmoidBce dz", z, loss, dz);
}

}  // namespace
}  // namespace pstrain::worker::nn::testing
