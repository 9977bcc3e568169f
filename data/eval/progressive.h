// Progressive validation (test-then-train) of a stream's partitions: each
// row is scored by the model as it stands just before the row's own step
// updates it (the step's forward pass), so a partition's AUC is the
// model's quality on data it had not yet seen, without holding rows back.
//
// PartitionScore keeps a fixed-size histogram of scores per label
// (kScoreBins bins over [0, 1], bin = floor(p * kScoreBins)), so memory is
// bounded whatever the partition's size and the parts of several workers
// merge exactly. The AUC from the histogram counts pairs within one bin as
// ties (one half): it differs from the exact AUC by at most the fraction of
// positive-negative pairs that share a bin (1/16384 of the score range).
// The log loss is exact (summed per row).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/buffer.h"

namespace pstrain::worker {

inline constexpr int kScoreBins = 16384;

class PartitionScore {
 public:
  PartitionScore();

  // REQUIRES: probs.size() == labels.size().
  void Add(std::span<const float> probs, std::span<const float> labels);
  void Merge(const PartitionScore& other);
  void Reset();

  int64_t rows() const { return rows_; }  // rows scored
  // Rows of the partition trained into the model: the scored ones and, on a
  // worker resumed from a checkpoint inside the partition, those trained
  // before it (their scores went with the attempt that trained them).
  int64_t trained_rows() const { return trained_rows_; }
  void set_trained_rows(int64_t rows) { trained_rows_ = rows; }
  double positives() const { return positives_; }
  // NaN when the labels are all equal (or there are no rows).
  double Auc() const;
  double LogLoss() const;  // 0 for no rows

  // Non-empty bins only: a few KiB for a partition, whatever its rows.
  Buffer Encode() const;
  // DataLoss naming `who` when `blob` is not an Encode() of a score.
  static absl::StatusOr<PartitionScore> Decode(const Buffer& blob, absl::string_view who);

 private:
  std::vector<uint64_t> pos_, neg_;  // [kScoreBins]
  int64_t rows_ = 0;
  int64_t trained_rows_ = 0;
  double positives_ = 0;
  double logloss_sum_ = 0;
};

}  // namespace pstrain::worker
