#include "data/batch_builder.h"

#include <algorithm>
#include <utility>
#include <cstring>
#include <limits>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace pstrain::worker {
namespace {

constexpr int kMaxRows = kMaxBatchRows;
// Batches a pool keeps: more than a reader has in flight (its prefetch).
constexpr size_t kMaxPooled = 16;

}  // namespace

// Batches whose last holder dropped them, for the builder to refill. Any
// thread gives back; the builder's takes.
class BatchBuilder::Pool {
 public:
  std::unique_ptr<Batch> Take() {
    absl::MutexLock lock(&mu_);
    if (free_.empty()) return nullptr;
    std::unique_ptr<Batch> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }
  void GiveBack(Batch* b) {
    std::unique_ptr<Batch> owned(b);
    absl::MutexLock lock(&mu_);
    if (free_.size() < kMaxPooled) free_.push_back(std::move(owned));
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<Batch>> free_ ABSL_GUARDED_BY(mu_);
};

BatchBuilder::BatchBuilder(int num_dense, int num_sparse, int expected_rows, int num_extra_labels)
    : num_dense_(num_dense),
      num_sparse_(num_sparse),
      expected_rows_(expected_rows),
      num_extra_labels_(num_extra_labels),
      pool_(std::make_shared<Pool>()) {
  Reset();
}

void BatchBuilder::Reset() {
  batch_ = pool_->Take();
  if (batch_ != nullptr) {
    // Emptied, its arrays keeping their capacity.
    Batch& b = *batch_;
    b.size = 0;
    b.labels.clear();
    b.extra_labels.clear();
    b.dense.clear();
    for (int f = 0; f < num_sparse_; ++f) {
      b.ids[f].clear();
      b.offsets[f].resize(1);
    }
    return;
  }
  batch_ = std::make_unique<Batch>(EmptyBatch(num_dense_, num_sparse_, num_extra_labels_));
  if (expected_rows_ > 0) {
    size_t n = static_cast<size_t>(expected_rows_);
    batch_->labels.reserve(n);
    batch_->dense.reserve(n * num_dense_);
    for (int f = 0; f < num_sparse_; ++f) {
      batch_->ids[f].reserve(n);
      batch_->offsets[f].reserve(n + 1);
    }
  }
}

bool BatchBuilder::Fits(int f, size_t n) const {
  return batch_->ids[f].size() + n <= kMaxIdsPerField;
}

bool BatchBuilder::Append(float label, const float* dense, const uint64_t* ids,
                          const uint32_t* field_end, const float* extra_labels) {
  Batch& b = *batch_;
  if (b.size == kMaxRows) return false;
  uint32_t begin = 0;
  for (int f = 0; f < num_sparse_; ++f) {
    if (!Fits(f, field_end[f] - begin)) return false;
    begin = field_end[f];
  }
  b.labels.push_back(label);
  if (num_extra_labels_ > 0) {
    b.extra_labels.insert(b.extra_labels.end(), extra_labels, extra_labels + num_extra_labels_);
  }
  b.dense.insert(b.dense.end(), dense, dense + num_dense_);
  begin = 0;
  for (int f = 0; f < num_sparse_; ++f) {
    uint32_t end = field_end[f];
    std::vector<uint64_t>& out = b.ids[f];
    if (end - begin == 1) {
      out.push_back(ids[begin]);
    } else {
      out.insert(out.end(), ids + begin, ids + end);
    }
    b.offsets[f].push_back(static_cast<uint32_t>(out.size()));
    begin = end;
  }
  ++b.size;
  return true;
}

bool BatchBuilder::AppendFrom(const Batch& src, int r) {
  Batch& b = *batch_;
  if (b.size == kMaxRows) return false;
  for (int f = 0; f < num_sparse_; ++f) {
    if (!Fits(f, src.offsets[f][r + 1] - src.offsets[f][r])) return false;
  }
  b.labels.push_back(src.labels[r]);
  if (num_extra_labels_ > 0) {
    const float* e = src.extra_labels.data() + static_cast<size_t>(r) * num_extra_labels_;
    b.extra_labels.insert(b.extra_labels.end(), e, e + num_extra_labels_);
  }
  const float* d = src.dense.data() + static_cast<size_t>(r) * num_dense_;
  b.dense.insert(b.dense.end(), d, d + num_dense_);
  for (int f = 0; f < num_sparse_; ++f) {
    const uint64_t* ids = src.ids[f].data();
    b.ids[f].insert(b.ids[f].end(), ids + src.offsets[f][r], ids + src.offsets[f][r + 1]);
    b.offsets[f].push_back(static_cast<uint32_t>(b.ids[f].size()));
  }
  ++b.size;
  return true;
}

std::shared_ptr<const Batch> BatchBuilder::Finish(SourcePosition end) {
  batch_->end = std::move(end);
  std::shared_ptr<const Batch> out(batch_.release(), [pool = pool_](const Batch* b) {
    pool->GiveBack(const_cast<Batch*>(b));  // nobody holds it any more
  });
  Reset();
  return out;
}

Batch EmptyBatch(int num_dense, int num_sparse, int num_extra_labels) {
  Batch b;
  b.num_extra_labels = num_extra_labels;
  b.num_dense = num_dense;
  b.num_sparse = num_sparse;
  b.ids.resize(num_sparse);
  b.offsets.assign(num_sparse, std::vector<uint32_t>{0});
  return b;
}

absl::Status ValidateBatch(const Batch& b) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("invalid batch: ", parts...));
  };
  if (b.size < 0 || b.num_dense < 0 || b.num_sparse < 0) return bad("negative size");
  size_t n = static_cast<size_t>(b.size);
  if (b.labels.size() != n) return bad("labels.size()=", b.labels.size(), " != size=", n);
  if (b.num_extra_labels < 0 || b.extra_labels.size() != n * b.num_extra_labels) {
    return bad("extra_labels.size()=", b.extra_labels.size(), " != size*num_extra_labels=",
               n * std::max(0, b.num_extra_labels));
  }
  if (b.dense.size() != n * b.num_dense) {
    return bad("dense.size()=", b.dense.size(), " != size*num_dense=", n * b.num_dense);
  }
  if (b.ids.size() != static_cast<size_t>(b.num_sparse) ||
      b.offsets.size() != static_cast<size_t>(b.num_sparse)) {
    return bad("ids/offsets hold ", b.ids.size(), "/", b.offsets.size(), " fields, want ",
               b.num_sparse);
  }
  for (int f = 0; f < b.num_sparse; ++f) {
    const std::vector<uint32_t>& off = b.offsets[f];
    if (off.size() != n + 1 || off[0] != 0) return bad("field ", f, ": bad offsets");
    for (size_t r = 0; r < n; ++r) {
      if (off[r + 1] <= off[r]) return bad("field ", f, " row ", r, ": no id");
    }
    if (off[n] != b.ids[f].size()) return bad("field ", f, ": offsets end != ids.size()");
  }
  return absl::OkStatus();
}

Batch SliceBatch(const Batch& batch, int begin, int end) {
  Batch b = EmptyBatch(batch.num_dense, batch.num_sparse, batch.num_extra_labels);
  b.size = end - begin;
  b.labels.assign(batch.labels.begin() + begin, batch.labels.begin() + end);
  const size_t ne = static_cast<size_t>(batch.num_extra_labels);
  b.extra_labels.assign(batch.extra_labels.begin() + begin * ne, batch.extra_labels.begin() + end * ne);
  size_t nd = static_cast<size_t>(batch.num_dense);
  b.dense.assign(batch.dense.begin() + begin * nd, batch.dense.begin() + end * nd);
  for (int f = 0; f < batch.num_sparse; ++f) {
    const std::vector<uint32_t>& off = batch.offsets[f];
    uint32_t base = off[begin];
    b.ids[f].assign(batch.ids[f].begin() + base, batch.ids[f].begin() + off[end]);
    b.offsets[f].resize(static_cast<size_t>(b.size) + 1);
    for (int r = 0; r <= b.size; ++r) b.offsets[f][r] = off[begin + r] - base;
  }
  return b;
}

std::vector<std::shared_ptr<const Batch>> SplitBatch(std::shared_ptr<const Batch> batch,
                                                     int batch_size) {
  std::vector<std::shared_ptr<const Batch>> out;
  if (batch->size <= batch_size) {
    out.push_back(std::move(batch));
    return out;
  }
  out.reserve((batch->size + batch_size - 1) / batch_size);
  for (int begin = 0; begin < batch->size; begin += batch_size) {
    int end = std::min(batch->size, begin + batch_size);
    out.push_back(std::make_shared<const Batch>(SliceBatch(*batch, begin, end)));
  }
  return out;
}

absl::StatusOr<std::shared_ptr<const Batch>> ConcatBatches(
    const std::vector<std::shared_ptr<const Batch>>& batches) {
  if (batches.empty()) return absl::InvalidArgumentError("ConcatBatches: no batches");
  const int nd = batches[0]->num_dense;
  const int ns = batches[0]->num_sparse;
  size_t rows = 0;
  std::vector<size_t> ids(ns, 0);
  for (const auto& b : batches) {
    if (b->num_dense != nd || b->num_sparse != ns || b->num_extra_labels != batches[0]->num_extra_labels) {
      return absl::InvalidArgumentError(absl::StrCat("ConcatBatches: shape (", b->num_dense,
                                                     ", ", b->num_sparse, ") != (", nd, ", ",
                                                     ns, ")"));
    }
    rows += b->size;
    for (int f = 0; f < ns; ++f) ids[f] += b->ids[f].size();
  }
  if (rows > static_cast<size_t>(kMaxRows) ||
      std::any_of(ids.begin(), ids.end(), [](size_t n) { return n > kMaxIdsPerField; })) {
    return absl::ResourceExhaustedError("ConcatBatches: result exceeds the limits of a Batch");
  }
  auto out = std::make_shared<Batch>(EmptyBatch(nd, ns, batches[0]->num_extra_labels));
  out->size = static_cast<int>(rows);
  out->labels.reserve(rows);
  out->dense.reserve(rows * nd);
  for (int f = 0; f < ns; ++f) {
    out->ids[f].reserve(ids[f]);
    out->offsets[f].reserve(rows + 1);
  }
  for (const auto& b : batches) {
    out->labels.insert(out->labels.end(), b->labels.begin(), b->labels.end());
    out->extra_labels.insert(out->extra_labels.end(), b->extra_labels.begin(), b->extra_labels.end());
    out->dense.insert(out->dense.end(), b->dense.begin(), b->dense.end());
    for (int f = 0; f < ns; ++f) {
      uint32_t base = static_cast<uint32_t>(out->ids[f].size());
      out->ids[f].insert(out->ids[f].end(), b->ids[f].begin(), b->ids[f].end());
      for (int r = 1; r <= b->size; ++r) out->offsets[f].push_back(base + b->offsets[f][r]);
    }
  }
  return std::shared_ptr<const Batch>(std::move(out));
}

bool BatchesEqual(const Batch& a, const Batch& b) {
  // Extra labels bit for bit: a missing one is NaN.
  const bool extra_equal =
      a.num_extra_labels == b.num_extra_labels && a.extra_labels.size() == b.extra_labels.size() &&
      std::memcmp(a.extra_labels.data(), b.extra_labels.data(), 4 * a.extra_labels.size()) == 0;
  return a.size == b.size && a.num_dense == b.num_dense && a.num_sparse == b.num_sparse &&
         a.labels == b.labels && extra_equal && a.dense == b.dense && a.ids == b.ids &&
         a.offsets == b.offsets;
}

}  // namespace pstrain::worker
