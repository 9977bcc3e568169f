// Teacher: the hidden click model of the synthetic world. Its logit is
//   bias
//   + main effects: a weight per (field, value), derived from a hash
//   + dense effects: a small fixed random tanh network of the standardized
//     log-transformed integers (non-linear)
//   + latent-factor interactions: for several field pairs, the dot product
//     of per-value random vectors of the two fields
//   + conjunction effects: for a few pairs of low-cardinality fields, a
//     hashed weight per value pair (no low-rank structure)
//   + dense x categorical effects: a standardized integer times a
//     per-value slope of some field.
// A logistic regression sees only the first two parts (linearly), so it
// must stay clearly below the teacher; models with pairwise interactions
// can get closer. Every weight comes from hashing (seed, part, field,
// value): no tables, any vocabulary size. Each part is scaled to a share of
// the logit's variance (measured on a pilot sample) and the bias is set for
// the target positive rate. Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pstrain::worker {

// The values of one synthetic row as they are written.
struct SyntheticRow {
  float label = 0;
  double probability = 0;  // the teacher's P(click); not written
  std::vector<int64_t> dense;
  std::vector<uint8_t> dense_empty;
  std::vector<uint32_t> tokens;  // written as 8 lowercase hex digits
  std::vector<uint8_t> token_empty;
};

struct TeacherOptions {
  // Standard deviation of the logit: how predictable clicks are. The default
  // gives an oracle AUC of about 0.83 with the default world (a logistic
  // regression trained on 500k rows reaches about 0.72, a field-weighted
  // factorization machine about 0.75).
  double signal_std = 1.6;
  // Shares of the logit variance (renormalized over the parts present).
  double main_share = 0.38;
  double dense_share = 0.15;
  double latent_share = 0.27;
  double conjunction_share = 0.12;
  double dense_cat_share = 0.08;
  // Latent-factor pairs join fields with at most this many values;
  // conjunction pairs fields with at most conjunction_max_vocab.
  uint32_t latent_max_vocab = 3000;
  uint32_t conjunction_max_vocab = 1000;
  int latent_pairs = 4;
  int latent_dim = 4;
  int conjunction_pairs = 3;
  int dense_cat_pairs = 3;
  int dense_units = 8;
};

class Teacher {
 public:
  // Calibrates on `pilot` (rows with features only). REQUIRES: pilot rows
  // shaped like vocab.size() fields and num_dense integers; pilot not empty.
  Teacher(const TeacherOptions& options, uint64_t seed, int num_dense,
          const std::vector<uint32_t>& vocab, const std::vector<SyntheticRow>& pilot,
          double target_positive_rate);

  double Logit(const SyntheticRow& row) const;
  double Probability(const SyntheticRow& row) const;

  // The unscaled parts of the logit, in the order of the class comment.
  static constexpr int kParts = 5;
  void Parts(const SyntheticRow& row, double parts[kParts]) const;

  double bias() const { return bias_; }
  // Multiplier of part `c` in the logit.
  double scale(int c) const { return scale_[c]; }
  // Bias, the multiplier of each part and the field pairs it uses.
  std::string Describe() const;

 private:
  struct FieldPair {
    int a = 0;
    int b = 0;
  };
  struct DenseCat {
    int dense = 0;
    int field = 0;
  };

  void ChoosePairs(const std::vector<uint32_t>& vocab);
  void Calibrate(const std::vector<SyntheticRow>& pilot, double target_positive_rate);
  double Standardized(const SyntheticRow& row, int j) const;
  uint64_t Key(const SyntheticRow& row, int f) const;

  TeacherOptions options_;
  uint64_t seed_;
  int num_dense_;
  int num_sparse_;
  std::vector<double> field_importance_;
  std::vector<FieldPair> latent_;
  std::vector<FieldPair> conjunction_;
  std::vector<DenseCat> dense_cat_;
  // Dense network: unit k reads inputs unit_inputs_[k*3 .. k*3+3).
  std::vector<int> unit_inputs_;
  std::vector<double> unit_weights_;
  std::vector<double> unit_bias_;
  std::vector<double> unit_out_;
  std::vector<double> dense_mean_;
  std::vector<double> dense_inv_std_;
  double scale_[kParts] = {0, 0, 0, 0, 0};
  double bias_ = 0;
};

}  // namespace pstrain::worker
