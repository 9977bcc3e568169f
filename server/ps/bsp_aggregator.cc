#include "server/ps/bsp_aggregator.h"

#include <algorithm>

#include "common/status.h"

namespace pstrain::server {

BspAggregator::BspAggregator(KvStore* store) : store_(store) {
  size_t n = store->layout().tables.size();
  dense_.resize(n);
  sparse_.resize(n);
}

void BspAggregator::Add(const std::vector<KvOp>& ops, uint32_t num_samples) {
  samples_ += num_samples;
  for (const KvOp& op : ops) {
    if (op.sparse) {
      SparseSum& s = sparse_[op.table];
      size_t dim = store_->layout().tables[op.table].dim;
      for (size_t i = 0; i < op.ids.size(); ++i) {
        auto [it, inserted] = s.row_of.try_emplace(op.ids[i], static_cast<uint32_t>(s.ids.size()));
        if (inserted) {
          s.ids.push_back(op.ids[i]);
          s.sum.resize(s.sum.size() + dim, 0.0f);
        }
        float* dst = s.sum.data() + static_cast<size_t>(it->second) * dim;
        const float* src = op.values.data() + i * dim;
        for (size_t j = 0; j < dim; ++j) dst[j] += src[j];
      }
      continue;
    }
    DenseShard* shard = store_->dense(op.table);
    DenseSum& d = dense_[op.table];
    if (d.sum.empty()) d.sum.assign(shard->length(), 0.0f);
    uint64_t off = op.begin - shard->offset();
    float* dst = d.sum.data() + off;
    for (size_t j = 0; j < op.values.size(); ++j) dst[j] += op.values[j];
    d.lo = std::min(d.lo, off);
    d.hi = std::max(d.hi, off + op.values.size());
  }
}

absl::Status BspAggregator::Apply(int64_t step, uint64_t samples) {
  if (samples == 0) samples = samples_;
  std::vector<KvOp> ops;
  for (size_t t = 0; t < dense_.size(); ++t) {
    DenseSum& d = dense_[t];
    if (d.hi > d.lo) {
      KvOp op;
      op.table = static_cast<uint32_t>(t);
      op.begin = store_->dense(op.table)->offset() + d.lo;
      op.count = d.hi - d.lo;
      op.values = std::span<const float>(d.sum.data() + d.lo, d.hi - d.lo);
      ops.push_back(op);
    }
    SparseSum& s = sparse_[t];
    if (!s.ids.empty()) {
      KvOp op;
      op.table = static_cast<uint32_t>(t);
      op.sparse = true;
      op.count = s.ids.size();
      op.ids = s.ids;
      op.values = s.sum;
      ops.push_back(op);
    }
  }
  absl::Status st = absl::OkStatus();
  if (samples > 0 && !ops.empty()) {
    st = store_->Push(ops, 1.0f / static_cast<float>(samples), step);
  }
  for (DenseSum& d : dense_) {
    if (d.hi > d.lo) std::fill(d.sum.begin() + d.lo, d.sum.begin() + d.hi, 0.0f);
    d.lo = UINT64_MAX;
    d.hi = 0;
  }
  for (SparseSum& s : sparse_) {
    s.row_of.clear();
    s.ids.clear();
    s.sum.clear();
  }
  samples_ = 0;
  return st;
}

}  // namespace pstrain::server
