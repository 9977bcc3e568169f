#include "data/synthetic_teacher.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/hash.h"
#include "data/schema.h"

namespace pstrain::worker {
namespace {

enum Part { kMain = 0, kDense = 1, kLatent = 2, kConjunction = 3, kDenseCat = 4 };

constexpr uint64_t kMissingKey = uint64_t{1} << 32;

uint64_t Hash(uint64_t seed, uint64_t part, uint64_t a, uint64_t b) {
  return Mix64(Mix64(Mix64(seed ^ (part * 0xa24baed4963ee407ULL)) ^ a) ^ b);
}

// Approximately standard normal (Irwin-Hall of four 16-bit uniforms).
double Gauss(uint64_t bits) {
  double s = static_cast<double>((bits & 0xffff) + ((bits >> 16) & 0xffff) +
                                 ((bits >> 32) & 0xffff) + (bits >> 48));
  return (s - 2.0 * 65535.0) * (1.7320508075688772 / 65536.0);
}

// Uniform with unit variance, from 16 bits.
double Symmetric(uint64_t bits16) {
  return (static_cast<double>(bits16) - 32767.5) * (1.7320508075688772 / 32768.0);
}

// Sequential random numbers for the teacher's own choices.
struct Rng {
  uint64_t state;
  uint64_t Next() { return Mix64(state += 0x9e3779b97f4a7c15ULL); }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

Teacher::Teacher(const TeacherOptions& options, uint64_t seed, int num_dense,
                 const std::vector<uint32_t>& vocab, const std::vector<SyntheticRow>& pilot,
                 double target_positive_rate)
    : options_(options),
      seed_(Mix64(seed ^ 0x544541434845ULL)),
      num_dense_(num_dense),
      num_sparse_(static_cast<int>(vocab.size())) {
  ChoosePairs(vocab);
  Calibrate(pilot, target_positive_rate);
}

void Teacher::ChoosePairs(const std::vector<uint32_t>& vocab) {
  Rng rng{seed_};
  field_importance_.resize(num_sparse_);
  for (int f = 0; f < num_sparse_; ++f) {
    field_importance_[f] = 0.2 + 1.3 * UnitFloat(rng.Next());
  }
  auto contains = [](const std::vector<FieldPair>& v, FieldPair p) {
    return std::any_of(v.begin(), v.end(),
                       [&](const FieldPair& q) { return q.a == p.a && q.b == p.b; });
  };
  auto pick_pairs = [&](const std::vector<int>& fields, int want, std::vector<FieldPair>* out) {
    const int n = static_cast<int>(fields.size());
    want = std::min(want, n * (n - 1) / 2);
    while (static_cast<int>(out->size()) < want) {
      int a = fields[rng.Below(n)], b = fields[rng.Below(n)];
      if (a == b) continue;
      FieldPair p{std::min(a, b), std::max(a, b)};
      if (!contains(*out, p)) out->push_back(p);
    }
  };
  std::vector<int> by_vocab(num_sparse_);
  for (int f = 0; f < num_sparse_; ++f) by_vocab[f] = f;
  std::stable_sort(by_vocab.begin(), by_vocab.end(),
                   [&](int a, int b) { return vocab[a] < vocab[b]; });
  // The fields with at most `max_vocab` values, or else the `min_count`
  // smallest ones, in field order.
  auto fields_up_to = [&](uint32_t max_vocab, size_t min_count) {
    std::vector<int> out;
    for (int f : by_vocab) {
      if (vocab[f] <= max_vocab || out.size() < min_count) out.push_back(f);
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  // Latent factors between fields of small to medium cardinality (like
  // user segment x ad category), conjunctions among the smallest ones.
  pick_pairs(fields_up_to(options_.latent_max_vocab, 6), options_.latent_pairs, &latent_);
  pick_pairs(fields_up_to(options_.conjunction_max_vocab, 4), options_.conjunction_pairs, &conjunction_);
  std::vector<int> mid = fields_up_to(10000, 1);
  for (int t = 0; t < options_.dense_cat_pairs && num_dense_ > 0 && !mid.empty(); ++t) {
    dense_cat_.push_back(DenseCat{rng.Below(num_dense_), mid[rng.Below(static_cast<int>(mid.size()))]});
  }

  const int units = num_dense_ > 0 ? options_.dense_units : 0;
  for (int k = 0; k < units; ++k) {
    for (int i = 0; i < 3; ++i) {
      unit_inputs_.push_back(rng.Below(num_dense_));
      unit_weights_.push_back(1.5 * Gauss(rng.Next()));
    }
    unit_bias_.push_back(0.7 * Gauss(rng.Next()));
    unit_out_.push_back(Gauss(rng.Next()));
  }
}

uint64_t Teacher::Key(const SyntheticRow& row, int f) const {
  return row.token_empty[f] ? kMissingKey : row.tokens[f];
}

double Teacher::Standardized(const SyntheticRow& row, int j) const {
  double x = DenseTransform(row.dense_empty[j] ? 0 : row.dense[j]);
  return (x - dense_mean_[j]) * dense_inv_std_[j];
}

void Teacher::Parts(const SyntheticRow& row, double parts[kParts]) const {
  double main = 0;
  for (int f = 0; f < num_sparse_; ++f) {
    main += field_importance_[f] * Gauss(Hash(seed_, kMain, f, Key(row, f)));
  }
  double dense = 0;
  for (size_t k = 0; k < unit_out_.size(); ++k) {
    double a = unit_bias_[k];
    for (int i = 0; i < 3; ++i) {
      a += unit_weights_[k * 3 + i] * Standardized(row, unit_inputs_[k * 3 + i]);
    }
    dense += unit_out_[k] * std::tanh(a);
  }
  double latent = 0;
  const int dim = options_.latent_dim;
  for (size_t p = 0; p < latent_.size(); ++p) {
    uint64_t u = Hash(seed_, kLatent, 2 * p, Key(row, latent_[p].a));
    uint64_t v = Hash(seed_, kLatent, 2 * p + 1, Key(row, latent_[p].b));
    double dot = 0;
    for (int d = 0; d < dim; ++d) {
      if (d > 0 && d % 4 == 0) {
        u = Mix64(u);
        v = Mix64(v);
      }
      const int shift = 16 * (d % 4);
      dot += Symmetric((u >> shift) & 0xffff) * Symmetric((v >> shift) & 0xffff);
    }
    latent += dot / std::sqrt(static_cast<double>(dim));
  }
  double conjunction = 0;
  for (size_t q = 0; q < conjunction_.size(); ++q) {
    uint64_t pair = Mix64(Key(row, conjunction_[q].a)) + Key(row, conjunction_[q].b);
    conjunction += Gauss(Hash(seed_, kConjunction, q, pair));
  }
  double dense_cat = 0;
  for (size_t t = 0; t < dense_cat_.size(); ++t) {
    dense_cat += Standardized(row, dense_cat_[t].dense) *
                 Gauss(Hash(seed_, kDenseCat, t, Key(row, dense_cat_[t].field)));
  }
  parts[kMain] = main;
  parts[kDense] = dense;
  parts[kLatent] = latent;
  parts[kConjunction] = conjunction;
  parts[kDenseCat] = dense_cat;
}

double Teacher::Logit(const SyntheticRow& row) const {
  double parts[kParts];
  Parts(row, parts);
  double logit = bias_;
  for (int c = 0; c < kParts; ++c) logit += scale_[c] * parts[c];
  return logit;
}

double Teacher::Probability(const SyntheticRow& row) const { return Sigmoid(Logit(row)); }

void Teacher::Calibrate(const std::vector<SyntheticRow>& pilot, double target_positive_rate) {
  const double n = static_cast<double>(pilot.size());
  dense_mean_.assign(num_dense_, 0.0);
  dense_inv_std_.assign(num_dense_, 0.0);
  for (int j = 0; j < num_dense_; ++j) {
    double sum = 0, sum2 = 0;
    for (const SyntheticRow& row : pilot) {
      double x = DenseTransform(row.dense_empty[j] ? 0 : row.dense[j]);
      sum += x;
      sum2 += x * x;
    }
    double mean = sum / n;
    double var = std::max(0.0, sum2 / n - mean * mean);
    dense_mean_[j] = mean;
    dense_inv_std_[j] = var > 1e-12 ? 1.0 / std::sqrt(var) : 0.0;
  }

  std::vector<double> parts(pilot.size() * kParts);
  for (size_t i = 0; i < pilot.size(); ++i) Parts(pilot[i], &parts[i * kParts]);
  const double share[kParts] = {options_.main_share, options_.dense_share, options_.latent_share,
                                options_.conjunction_share, options_.dense_cat_share};
  double stdev[kParts];
  double total_share = 0;
  for (int c = 0; c < kParts; ++c) {
    double sum = 0, sum2 = 0;
    for (size_t i = 0; i < pilot.size(); ++i) {
      sum += parts[i * kParts + c];
      sum2 += parts[i * kParts + c] * parts[i * kParts + c];
    }
    double mean = sum / n;
    stdev[c] = std::sqrt(std::max(0.0, sum2 / n - mean * mean));
    if (stdev[c] > 1e-9 && share[c] > 0) total_share += share[c];
  }
  for (int c = 0; c < kParts; ++c) {
    bool present = stdev[c] > 1e-9 && share[c] > 0;
    scale_[c] = present ? options_.signal_std * std::sqrt(share[c] / total_share) / stdev[c] : 0.0;
  }

  std::vector<double> logits(pilot.size());
  for (size_t i = 0; i < pilot.size(); ++i) {
    double l = 0;
    for (int c = 0; c < kParts; ++c) l += scale_[c] * parts[i * kParts + c];
    logits[i] = l;
  }
  double lo = -40, hi = 40;
  for (int iter = 0; iter < 60; ++iter) {
    double mid = 0.5 * (lo + hi);
    double rate = 0;
    for (double l : logits) rate += Sigmoid(l + mid);
    (rate / n < target_positive_rate ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

std::string Teacher::Describe() const {
  std::string out = absl::StrFormat("bias %.4f; scales main %.4f dense %.4f latent %.4f "
                                    "conjunction %.4f dense_cat %.4f",
                                    bias_, scale_[0], scale_[1], scale_[2], scale_[3], scale_[4]);
  absl::StrAppend(&out, "\nlatent pairs:");
  for (const FieldPair& p : latent_) absl::StrAppend(&out, " C", p.a + 1, "xC", p.b + 1);
  absl::StrAppend(&out, "\nconjunction pairs:");
  for (const FieldPair& p : conjunction_) absl::StrAppend(&out, " C", p.a + 1, "xC", p.b + 1);
  absl::StrAppend(&out, "\ndense x categorical:");
  for (const DenseCat& d : dense_cat_) absl::StrAppend(&out, " I", d.dense + 1, "xC", d.field + 1);
  return out;
}

}  // namespace pstrain::worker
