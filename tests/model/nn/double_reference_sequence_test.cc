// The bag and sequence ops (embedding bags, DIN's attention pooling, BST's
// sequence inputs, attention and mean) and the experts' gate mix against
// central differences of a double forward (double_reference.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/nn/attention_pooling.h"
#include "model/nn/embedding_bag.h"
#include "model/nn/expert_mix.h"
#include "model/nn/sequence_attention.h"
#include "model/nn/tensor.h"
#include "tests/model/nn/double_reference.h"

namespace pstrain::worker::nn::testing {
namespace {

// ---- double references, from the headers' definitions ----

// One field's bags, CSR. Bag 0 (2 items) lies before the chunk under test,
// so the chunk's first offset is > 0 as for a chunk that starts mid-batch;
// the chunk has an empty bag, a one-item bag and a bag of 4 (longer than a
// max_length of 3). Rows repeat within and across bags.
struct BagCase {
  BagCase(int unique, std::mt19937& rng) {
    std::uniform_int_distribution<uint32_t> pick(0, unique - 1);
    offsets.push_back(0);
    for (const int n : {2, 3, 0, 1, 4, 2}) {
      for (int i = 0; i < n; ++i) index.push_back(pick(rng));
      offsets.push_back(static_cast<uint32_t>(index.size()));
    }
  }
  int batch() const { return static_cast<int>(offsets.size()) - 2; }
  uint32_t first() const { return offsets[1]; }
  int items() const { return static_cast<int>(offsets.back() - first()); }
  int size(int b) const { return static_cast<int>(offsets[b + 2] - offsets[b + 1]); }
  // Item i of chunk bag b: its row of the items matrix, its per-item row.
  int row(int b, int i) const { return static_cast<int>(index[offsets[b + 1] + i]); }
  int item(int b, int i) const { return static_cast<int>(offsets[b + 1] - first()) + i; }
  Bags bags() const { return Bags{index.data(), offsets.data() + 1, batch(), offsets.data() + 1}; }

  std::vector<uint32_t> index, offsets;
};

// out.row(b) = sum over bag b of weight(b, i) * rows.row(row(b, i)).
Vec RefBagSum(const Vec& rows, const BagCase& c, int d,
              const std::function<double(int b, int i)>& weight) {
  Vec out(static_cast<size_t>(c.batch()) * d, 0.0);
  for (int b = 0; b < c.batch(); ++b) {
    for (int i = 0; i < c.size(b); ++i) {
      for (int k = 0; k < d; ++k) out[b * d + k] += weight(b, i) * rows[c.row(b, i) * d + k];
    }
  }
  return out;
}

// DIN's scoring-MLP input rows [h, t, h - t, h * t], one per item.
Vec RefAttentionFeatures(const Vec& items, const Vec& target, const BagCase& c, int d) {
  Vec f;
  for (int b = 0; b < c.batch(); ++b) {
    for (int i = 0; i < c.size(b); ++i) {
      const double *h = &items[c.row(b, i) * d], *t = &target[b * d];
      for (int k = 0; k < d; ++k) f.push_back(h[k]);
      for (int k = 0; k < d; ++k) f.push_back(t[k]);
      for (int k = 0; k < d; ++k) f.push_back(h[k] - t[k]);
      for (int k = 0; k < d; ++k) f.push_back(h[k] * t[k]);
    }
  }
  return f;
}

// Rows, in order, of each bag's items plus their positions (0: the most
// recent; older ones past max_length - 1 share the last), then the bag's
// target (the most recent, position 0) when there is one.
Vec RefSequenceInputs(const Vec& items, const Vec& positions, const Vec* target, const BagCase& c,
                      int d, int max_length) {
  Vec x;
  for (int b = 0; b < c.batch(); ++b) {
    const int n = c.size(b), of = target != nullptr ? n + 1 : n;
    for (int i = 0; i < n; ++i) {
      const int p = std::min(of - 1 - i, max_length - 1);
      for (int k = 0; k < d; ++k) x.push_back(items[c.row(b, i) * d + k] + positions[p * d + k]);
    }
    if (target == nullptr) continue;
    for (int k = 0; k < d; ++k) x.push_back((*target)[b * d + k] + positions[k]);
  }
  return x;
}

// Per head h (columns [h hd, (h + 1) hd)): out_i = sum_j a_j v_j over bag
// items j, a = softmax_j(<q_i, k_j> / sqrt(hd)).
Vec RefSequenceAttention(const Vec& q, const Vec& k, const Vec& v, const BagCase& c, int d,
                         int heads) {
  const int hd = d / heads;
  Vec out(q.size(), 0.0);
  for (int b = 0; b < c.batch(); ++b) {
    const int n = c.size(b), g0 = c.item(b, 0);
    for (int i = 0; i < n; ++i) {
      for (int h = 0; h < heads; ++h) {
        const int e0 = h * hd, e1 = e0 + hd;
        Vec a(n, 0.0);
        double sum = 0.0;
        for (int j = 0; j < n; ++j) {
          for (int e = e0; e < e1; ++e) a[j] += q[(g0 + i) * d + e] * k[(g0 + j) * d + e];
          sum += (a[j] = std::exp(a[j] / std::sqrt(static_cast<double>(hd))));
        }
        for (int j = 0; j < n; ++j) {
          for (int e = e0; e < e1; ++e) out[(g0 + i) * d + e] += a[j] / sum * v[(g0 + j) * d + e];
        }
      }
    }
  }
  return out;
}

// out.row(b) = the mean of y's rows of bag b's items (zeros for an empty bag).
Vec RefSequenceMean(const Vec& y, const BagCase& c, int d) {
  Vec out(static_cast<size_t>(c.batch()) * d, 0.0);
  for (int b = 0; b < c.batch(); ++b) {
    for (int i = 0; i < c.size(b); ++i) {
      for (int k = 0; k < d; ++k) out[b * d + k] += y[c.item(b, i) * d + k] / c.size(b);
    }
  }
  return out;
}

// g = softmax(z) per row (into `gate`); out = sum_e g_e y_e.
Vec RefExpertMix(const Vec& z, const Vec& y, int rows, int experts, int width,
                 Vec* gate = nullptr) {
  Vec out(static_cast<size_t>(rows) * width, 0.0), g(z.size());
  for (int r = 0; r < rows; ++r) {
    double sum = 0.0;
    for (int e = 0; e < experts; ++e) sum += std::exp(z[r * experts + e]);
    for (int e = 0; e < experts; ++e) {
      g[r * experts + e] = std::exp(z[r * experts + e]) / sum;
      for (int c = 0; c < width; ++c) {
        out[r * width + c] += g[r * experts + e] * y[(r * experts + e) * width + c];
      }
    }
  }
  if (gate != nullptr) *gate = g;
  return out;
}

// ---- the checks ----

TEST_F(DoubleReference, EmbeddingBagGradientsMatchOnAChunkWithEmptyBags) {
  std::mt19937 rng(16);
  const int unique = 6, dim = 5;
  const BagCase c(unique, rng);
  for (const Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    for (const bool accumulate : {false, true}) {
      const bool mean = pooling == Pooling::kMean;
      const std::string tag =
          std::string("EmbeddingBag ") + (mean ? "mean" : "sum") + (accumulate ? " acc " : " ");
      Vec rows = Draw(unique * dim, rng);
      const Vec prior = Draw(c.batch() * dim, rng), g = Draw(c.batch() * dim, rng);
      auto ref = [&] {
        return RefBagSum(rows, c, dim, [&](int b, int) { return mean ? 1.0 / c.size(b) : 1.0; });
      };
      Vec want = ref();
      for (size_t e = 0; e < want.size() && accumulate; ++e) want[e] += prior[e];
      const std::vector<float> rows_f = F(rows);
      Strided out(c.batch(), dim, 3, prior), d_out(c.batch(), dim, 2, g);
      EmbeddingBagForward(rows_f.data(), c.bags(), pooling, accumulate, out.view());
      ExpectForwardMatches(tag + "y", out.Get(), want);
      std::vector<float> d_rows(rows.size(), 0.0f);
      EmbeddingBagBackward(d_out.view(), c.bags(), pooling, d_rows.data());
      ExpectMatchesDoubleDifferences(
          tag + "d_rows", rows, [&] { return Dot(g, ref()); }, d_rows);
    }
  }
}

// DIN: L = <G_f, features> + <G_o, score-weighted bag sums>, the scores an
// input (the scoring MLP between the two ops is Linear).
TEST_F(DoubleReference, AttentionPoolingGradientsMatchOnAChunk) {
  std::mt19937 rng(20);
  const int unique = 5, d = 4;
  const BagCase c(unique, rng);
  const int n = c.items(), batch = c.batch();
  Vec items = Draw(unique * d, rng), target = Draw(batch * d, rng), scores = Draw(n, rng);
  const Vec gf = Draw(n * 4 * d, rng), go = Draw(batch * d, rng);
  auto pooled = [&] {
    return RefBagSum(items, c, d, [&](int b, int i) { return scores[c.item(b, i)]; });
  };
  auto loss = [&] {
    return Dot(gf, RefAttentionFeatures(items, target, c, d)) + Dot(go, pooled());
  };
  const std::vector<float> items_f = F(items), scores_f = F(scores);
  Strided ts(batch, d, 3, target), features(n, 4 * d, 2), out(batch, d, 1),
      d_features(n, 4 * d, 1, gf), d_out(batch, d, 2, go), d_target(batch, d, 3);
  AttentionFeatures(items_f.data(), c.bags(), c.first(), ts.view(), features.view());
  WeightedBagSum(items_f.data(), c.bags(), c.first(), scores_f.data(), out.view());
  ExpectForwardMatches("DIN features", features.Get(), RefAttentionFeatures(items, target, c, d));
  ExpectForwardMatches("DIN out", out.Get(), pooled());
  std::vector<float> d_scores(n), d_items(items.size(), 0.0f);
  WeightedBagDot(d_out.view(), items_f.data(), c.bags(), c.first(), d_scores.data());
  AttentionPoolingBackward(d_out.view(), d_features.view(), items_f.data(), c.bags(), c.first(),
                           scores_f.data(), ts.view(), d_items.data(), d_target.view());
  ExpectMatchesDoubleDifferences("DIN d_scores", scores, loss, d_scores);
  ExpectMatchesDoubleDifferences("DIN d_items", items, loss, d_items);
  ExpectMatchesDoubleDifferences("DIN d_target", target, loss, d_target.Get());
}

TEST_F(DoubleReference, SequenceInputsGradientsMatchWithSharedPositions) {
  std::mt19937 rng(21);
  const int unique = 5, d = 4, max_length = 3;  // < the bag of 4 (5 with its target)
  const BagCase c(unique, rng);
  for (const bool with_target : {false, true}) {
    const std::string tag = with_target ? "SeqInputs target " : "SeqInputs ";
    const int rows = c.items() + (with_target ? c.batch() : 0);
    Vec items = Draw(unique * d, rng), positions = Draw(max_length * d, rng),
        target = Draw(c.batch() * d, rng);
    const Vec g = Draw(rows * d, rng);
    auto ref = [&] {
      return RefSequenceInputs(items, positions, with_target ? &target : nullptr, c, d, max_length);
    };
    const std::vector<float> items_f = F(items), positions_f = F(positions);
    Strided ts(c.batch(), d, 2, target), x(rows, d, 3), dx(rows, d, 1, g),
        d_target(c.batch(), d, 2);
    SequenceInputs(items_f.data(), c.bags(), c.first(), positions_f.data(), max_length,
                   with_target ? ConstMatrixView(ts.view()) : ConstMatrixView(), x.view());
    ExpectForwardMatches(tag + "x", x.Get(), ref());
    std::vector<float> d_items(items.size(), 0.0f), d_positions(positions.size(), 0.0f);
    SequenceInputsBackward(dx.view(), c.bags(), c.first(), max_length, d_items.data(),
                           d_positions.data(), with_target ? d_target.view() : MatrixView());
    auto loss = [&] { return Dot(g, ref()); };
    ExpectMatchesDoubleDifferences(tag + "d_items", items, loss, d_items);
    ExpectMatchesDoubleDifferences(tag + "d_positions", positions, loss, d_positions);
    if (with_target) ExpectMatchesDoubleDifferences(tag + "d_target", target, loss, d_target.Get());
  }
}

TEST_F(DoubleReference, SequenceAttentionGradientsMatchWithSeveralHeads) {
  std::mt19937 rng(22);
  const int d = 6, max_n = 5;  // > the longest bag (4): a wider stride in `weights`
  const BagCase c(3, rng);
  const int n = c.items();
  for (const int heads : {1, 3}) {
    const std::string tag = "SeqAttention heads=" + std::to_string(heads) + " ";
    Vec q = Draw(n * d, rng), k = Draw(n * d, rng), v = Draw(n * d, rng);
    const Vec g = Draw(n * d, rng);
    auto ref = [&] { return RefSequenceAttention(q, k, v, c, d, heads); };
    Strided qs(n, d, 1, q), ks(n, d, 2, k), vs(n, d, 3, v), out(n, d, 2), d_out(n, d, 1, g),
        dq(n, d, 3), dk(n, d, 1), dv(n, d, 2);
    std::vector<float> weights(static_cast<size_t>(n) * heads * max_n);
    SequenceAttention(qs.view(), ks.view(), vs.view(), c.bags(), c.first(), heads, max_n,
                      weights.data(), out.view());
    ExpectForwardMatches(tag + "y", out.Get(), ref());
    SequenceAttentionBackward(qs.view(), ks.view(), vs.view(), weights.data(), d_out.view(),
                              c.bags(), c.first(), heads, max_n, dq.view(), dk.view(), dv.view());
    auto loss = [&] { return Dot(g, ref()); };
    ExpectMatchesDoubleDifferences(tag + "dq", q, loss, dq.Get());
    ExpectMatchesDoubleDifferences(tag + "dk", k, loss, dk.Get());
    ExpectMatchesDoubleDifferences(tag + "dv", v, loss, dv.Get());
  }
}

TEST_F(DoubleReference, SequenceMeanGradientsMatchWithAnEmptyBag) {
  std::mt19937 rng(23);
  const int d = 5;
  const BagCase c(4, rng);
  Vec y = Draw(c.items() * d, rng);
  const Vec g = Draw(c.batch() * d, rng);
  Strided ys(c.items(), d, 2, y), out(c.batch(), d, 3), d_out(c.batch(), d, 1, g),
      dy(c.items(), d, 2);
  SequenceMean(ys.view(), c.bags(), c.first(), out.view());
  ExpectForwardMatches("SeqMean y", out.Get(), RefSequenceMean(y, c, d));
  SequenceMeanBackward(d_out.view(), c.bags(), c.first(), dy.view());
  ExpectMatchesDoubleDifferences(
      "SeqMean dy", y, [&] { return Dot(g, RefSequenceMean(y, c, d)); }, dy.Get());
}

TEST_F(DoubleReference, ExpertMixGradientsMatchOnStridedViews) {
  std::mt19937 rng(24);
  const int rows = 4, experts = 3, width = 5;
  Vec z = Draw(rows * experts, rng, -2.0f, 2.0f), y = Draw(rows * experts * width, rng), gate;
  const Vec g = Draw(rows * width, rng);
  Strided zs(rows, experts, 1, z), ys(rows, experts * width, 2, y), gs(rows, experts, 3),
      out(rows, width, 2), d_out(rows, width, 1, g), dz(rows, experts, 2),
      dy(rows, experts * width, 1);
  ExpertMixForward(zs.view(), ys.view(), gs.view(), out.view());
  ExpectForwardMatches("ExpertMix y", out.Get(), RefExpertMix(z, y, rows, experts, width, &gate));
  ExpectForwardMatches("ExpertMix g", gs.Get(), gate);
  ExpertMixBackward(gs.view(), ys.view(), d_out.view(), dz.view(), dy.view());
  auto loss = [&] { return Dot(g, RefExpertMix(z, y, rows, experts, width)); };
  ExpectMatchesDoubleDifferences("ExpertMix dz", z, loss, dz.Get());
  ExpectMatchesDoubleDifferences("ExpertMix dy", y, loss, dy.Get());
}

}  // namespace
}  // namespace pstrain::worker::nn::testing
