// SyntheticWorld: a plausible click-through world for tests and benchmarks.
// Rows look like Criteo's (label, count-like integers, hex categorical
// tokens with Zipf-distributed values over vocabularies from ~10 to ~1e6
// values, some values missing) and a hidden teacher gives each row its click
// probability (synthetic_teacher.h). Every row is a pure function of
// (options, row index), so any range of rows can be generated on its own.
// Immutable after Create(); thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/parser.h"
#include "data/schema.h"
#include "data/synthetic_teacher.h"
#include "data/zipf.h"

namespace pstrain::worker {

struct SyntheticOptions {
  int64_t rows = 100000;  // used by WriteSynthetic
  // WriteSynthetic writes rows [first_row, first_row + rows): a train and an
  // eval file of one world (same seed) use disjoint row ranges.
  int64_t first_row = 0;
  uint64_t seed = 1;
  int num_dense = 13;
  int num_sparse = 26;
  double zipf = 1.1;  // exponent of the value distribution of every field
  uint32_t min_vocab = 10;
  uint32_t max_vocab = 1000000;
  double missing_token_rate = 0.05;  // mean fraction of empty tokens
  double missing_dense_rate = 0.1;   // mean fraction of empty integers
  double target_positive_rate = 0.25;
  // Fraction of the non-empty categorical tokens replaced by a fresh value
  // never drawn before (a random 32-bit token: seen once, barring a rare
  // collision), so the id space keeps growing over the file with a long
  // tail of singletons. 0: none (and the rows are exactly those without
  // this option).
  double new_id_rate = 0;
  // Drift over eras (a stream's partitions: `pstrain gen --stream`): in era
  // k a value's token is re-minted floor(k * drift + u) times (u uniform per
  // field and value), so from one era to the next a `drift` fraction of
  // every field's values turns into new ids with new teacher weights (the
  // teacher hashes tokens): the catalogue turns over, a frozen model ages.
  // Era 0, or drift 0: the rows without this option.
  double drift = 0;
  int64_t era = 0;
  TeacherOptions teacher;
};

// InvalidArgument naming the first bad setting.
absl::Status ValidateSyntheticOptions(const SyntheticOptions& options);

class SyntheticWorld {
 public:
  static absl::StatusOr<std::unique_ptr<SyntheticWorld>> Create(const SyntheticOptions& options);

  // Features, probability and label of row `r` (any r >= 0).
  void SampleRow(int64_t r, SyntheticRow* row) const;

  // The teacher's probability for a row's features (label ignored).
  double Probability(const SyntheticRow& row) const { return teacher_->Probability(row); }

  // Appends row's TSV line, with its '\n', to `out`.
  void FormatRow(const SyntheticRow& row, std::string* out) const;
  // Inverse of FormatRow (line without '\n'); InvalidArgument if the line
  // is not shaped like this world's rows. Sets probability too.
  absl::Status ParseRow(std::string_view line, SyntheticRow* row) const;

  // What the Parser of `schema` (CreateParser) would make of FormatRow(row).
  // REQUIRES: schema.num_dense/num_sparse match the options.
  void ToParsedRow(const SyntheticRow& row, const Schema& schema, ParsedRow* out) const;

  const SyntheticOptions& options() const { return options_; }
  uint32_t vocab_size(int field) const { return fields_[field].vocab; }
  const Teacher& teacher() const { return *teacher_; }

 private:
  struct FieldShape {
    uint32_t vocab = 0;
    double missing_rate = 0;
    ZipfSampler zipf{1, 1.0};
  };
  struct DenseShape {
    double missing_rate = 0;
    double alpha = 2;    // Lomax tail exponent
    double scale = 1;    // Lomax scale
    double negative_rate = 0;
  };

  explicit SyntheticWorld(const SyntheticOptions& options);
  void SampleFeatures(uint64_t* rng_state, SyntheticRow* row) const;

  SyntheticOptions options_;
  std::vector<FieldShape> fields_;
  std::vector<DenseShape> dense_;
  std::unique_ptr<Teacher> teacher_;
};

}  // namespace pstrain::worker
