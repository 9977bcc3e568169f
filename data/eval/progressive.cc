#include "data/eval/progressive.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr uint32_t kMagic = 0x50564131;  // "PVA1"
constexpr double kEps = 1e-7;

struct Header {
  uint32_t magic;
  uint32_t bins;  // non-empty bins that follow
  int64_t rows;
  int64_t trained_rows;
  double positives;
  double logloss_sum;
};

struct Bin {
  uint32_t index;
  uint32_t pad;
  uint64_t pos;
  uint64_t neg;
};

}  // namespace

PartitionScore::PartitionScore() : pos_(kScoreBins, 0), neg_(kScoreBins, 0) {}

void PartitionScore::Add(std::span<const float> probs, std::span<const float> labels) {
  for (size_t i = 0; i < probs.size(); ++i) {
    const double p = std::clamp(static_cast<double>(probs[i]), 0.0, 1.0);
    const bool positive = labels[i] > 0.5f;
    const int bin = std::min(kScoreBins - 1, static_cast<int>(p * kScoreBins));
    (positive ? pos_ : neg_)[bin] += 1;
    const double q = std::clamp(p, kEps, 1 - kEps);
    logloss_sum_ -= positive ? std::log(q) : std::log(1 - q);
    positives_ += positive ? 1 : 0;
  }
  rows_ += static_cast<int64_t>(probs.size());
}

void PartitionScore::Merge(const PartitionScore& o) {
  for (int b = 0; b < kScoreBins; ++b) {
    pos_[b] += o.pos_[b];
    neg_[b] += o.neg_[b];
  }
  rows_ += o.rows_;
  trained_rows_ += o.trained_rows_;
  positives_ += o.positives_;
  logloss_sum_ += o.logloss_sum_;
}

void PartitionScore::Reset() { *this = PartitionScore(); }

double PartitionScore::Auc() const {
  // Pairs (positive above negative) + half the pairs in one bin.
  double wins = 0, neg_below = 0, npos = 0, nneg = 0;
  for (int b = 0; b < kScoreBins; ++b) {
    const double p = static_cast<double>(pos_[b]), n = static_cast<double>(neg_[b]);
    wins += p * neg_below + 0.5 * p * n;
    neg_below += n;
    npos += p;
    nneg += n;
  }
  if (npos == 0 || nneg == 0) return NAN;
  return wins / (npos * nneg);
}

double PartitionScore::LogLoss() const { return rows_ > 0 ? logloss_sum_ / rows_ : 0.0; }

Buffer PartitionScore::Encode() const {
  std::vector<Bin> bins;
  for (int b = 0; b < kScoreBins; ++b) {
    if (pos_[b] != 0 || neg_[b] != 0) bins.push_back(Bin{static_cast<uint32_t>(b), 0, pos_[b], neg_[b]});
  }
  Header h{kMagic, static_cast<uint32_t>(bins.size()), rows_, trained_rows_, positives_, logloss_sum_};
  std::string blob(sizeof(h) + bins.size() * sizeof(Bin), '\0');
  std::memcpy(blob.data(), &h, sizeof(h));
  if (!bins.empty()) std::memcpy(blob.data() + sizeof(h), bins.data(), bins.size() * sizeof(Bin));
  return Buffer::FromString(std::move(blob));
}

absl::StatusOr<PartitionScore> PartitionScore::Decode(const Buffer& blob, absl::string_view who) {
  const auto bad = [&](absl::string_view why) {
    return absl::DataLossError(absl::StrCat("progressive score of ", who, ": ", why));
  };
  Header h{};
  if (blob.size() < sizeof(h)) return bad("short");
  std::memcpy(&h, blob.data(), sizeof(h));
  if (h.magic != kMagic) return bad("bad magic");
  if (h.bins > static_cast<uint32_t>(kScoreBins) ||
      blob.size() != sizeof(h) + size_t{h.bins} * sizeof(Bin)) {
    return bad("wrong size");
  }
  PartitionScore s;
  uint64_t total = 0;
  for (uint32_t i = 0; i < h.bins; ++i) {
    Bin b{};
    std::memcpy(&b, blob.data() + sizeof(h) + i * sizeof(Bin), sizeof(b));
    if (b.index >= static_cast<uint32_t>(kScoreBins)) return bad("bin out of range");
    s.pos_[b.index] += b.pos;
    s.neg_[b.index] += b.neg;
    total += b.pos + b.neg;
  }
  if (h.rows < 0 || total != static_cast<uint64_t>(h.rows)) return bad("rows do not add up");
  if (h.trained_rows < 0) return bad("negative rows");
  s.rows_ = h.rows;
  s.trained_rows_ = h.trained_rows;
  s.positives_ = h.positives;
  s.logloss_sum_ = h.logloss_sum;
  return s;
}

}  // namespace pstrain::worker
