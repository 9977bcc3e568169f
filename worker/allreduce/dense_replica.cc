#include "worker/allreduce/dense_replica.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include <unistd.h>

#include <cstdio>

#include "common/checkpoint/shard_file.h"
#include "common/file_util.h"
#include "common/optim/finite.h"
#include "common/optim/initializer.h"
#include "common/status.h"
#include "model/nn/device.h"

namespace pstrain::worker {

absl::StatusOr<std::unique_ptr<DenseReplica>> DenseReplica::Create(
    const std::vector<TableSpec>& tables, DenseReplicaOptions options, Collective* collective,
    CollectiveQueue* queue) {
  std::unique_ptr<DenseReplica> r(new DenseReplica(options, collective, queue));
  r->slot_.assign(tables.size(), -1);
  // Reverse table order: the backward pass finishes the last layers first.
  size_t offset = 0;
  size_t bucket_floats = std::max<size_t>(1, options.bucket_bytes / sizeof(float));
  for (auto it = tables.rbegin(); it != tables.rend(); ++it) {
    const TableSpec& spec = *it;
    if (spec.kind != TableKind::kDense || !spec.on_workers) continue;
    Table t;
    t.spec = spec;
    // As on a server's dense shard: a dense "row" is one element, so
    // row-wise Adagrad is per-element Adagrad.
    OptimizerConfig config = spec.optimizer;
    if (config.kind == OptimizerKind::kRowwiseAdagrad) config.kind = OptimizerKind::kAdagrad;
    PS_ASSIGN_OR_RETURN(t.optimizer, optim::Optimizer::Create(config));
    PS_ASSIGN_OR_RETURN(optim::Initializer init, optim::Initializer::Create(spec.init, spec.id));
    t.weights.resize(spec.size);
    init.FillRange(0, t.weights.data(), spec.size);
    t.state.resize(t.optimizer->StateFloats(spec.size));
    if (!t.state.empty()) t.optimizer->InitState(t.state.data(), spec.size, spec.size);
    t.grad_offset = offset;
    if (r->buckets_.empty() || r->buckets_.back().end - r->buckets_.back().begin >= bucket_floats) {
      r->buckets_.push_back(Bucket{offset, offset});
    }
    Bucket& b = r->buckets_.back();
    b.end = offset + spec.size;
    ++b.tables;
    t.bucket = static_cast<int>(r->buckets_.size() - 1);
    offset += spec.size;
    r->slot_[spec.id] = static_cast<int>(r->tables_.size());
    r->ids_.push_back(spec.id);
    r->tables_.push_back(std::move(t));
  }
  if (r->buckets_.empty()) r->buckets_.push_back(Bucket{0, 0});
  // The sample count and the workers with data ride in the last bucket
  // (the first layers' tables).
  r->flat_.assign(offset + 2, 0.0f);
  r->buckets_.back().end = offset + 2;
  if (options.staging != nullptr) {
    PS_ASSIGN_OR_RETURN(void* mem, options.staging->Allocate(r->flat_.size() * sizeof(float)));
    r->device_flat_ = static_cast<float*>(mem);
  }
  return r;
}

DenseReplica::~DenseReplica() {
  if (device_flat_ != nullptr) options_.staging->Free(device_flat_);
}

absl::Status DenseReplica::Broadcast(int root) {
  for (Table& t : tables_) {
    PS_RETURN_IF_ERROR(Annotate(collective_->Broadcast(t.weights.data(), t.weights.size(), root),
                                absl::StrCat("broadcast of ", t.spec.name)));
  }
  return absl::OkStatus();
}

void DenseReplica::BeginStep() {
  for (Bucket& b : buckets_) {
    b.ready = 0;
    b.started = false;
    b.handle = CollectiveQueue::Handle();
  }
}

void DenseReplica::Start(Bucket& b) {
  b.started = true;
  float* data = flat_.data() + b.begin;
  size_t n = b.end - b.begin;
  Collective* c = collective_;
  if (device_flat_ == nullptr) {
    b.handle = queue_->Submit([c, data, n] { return c->AllReduce(data, n, ReduceOp::kSum); });
    return;
  }
  nn::Device* dev = options_.staging;
  float* on_device = device_flat_ + b.begin;
  b.handle = queue_->Submit([c, dev, data, on_device, n]() -> absl::Status {
    PS_RETURN_IF_ERROR(dev->CopyToDevice(on_device, data, n * sizeof(float)));
    PS_RETURN_IF_ERROR(dev->Synchronize());  // the collective runs on its own stream
    PS_RETURN_IF_ERROR(c->AllReduce(on_device, n, ReduceOp::kSum));
    return dev->CopyToHost(data, on_device, n * sizeof(float));
  });
}

void DenseReplica::OnReady(uint32_t table) {
  if (!holds(table)) return;
  Bucket& b = buckets_[tables_[slot_[table]].bucket];
  ++b.ready;
  // The last bucket also carries the sample count, known only in Finish().
  bool last = &b == &buckets_.back();
  if (options_.overlap && !last && b.ready == b.tables && !b.started) Start(b);
}

absl::StatusOr<double> DenseReplica::Finish(uint32_t num_samples, float lr_scale) {
  samples_slot() = static_cast<float>(num_samples);
  with_data_slot() = 1.0f;
  return SumAndApply(lr_scale);
}

absl::StatusOr<double> DenseReplica::FinishIdle(float lr_scale) {
  BeginStep();
  std::fill(flat_.begin(), flat_.end(), 0.0f);
  return SumAndApply(lr_scale);
}

absl::StatusOr<double> DenseReplica::SumAndApply(float lr_scale) {
  for (Bucket& b : buckets_) {
    if (!b.started) Start(b);
  }
  absl::Time t0 = absl::Now();
  for (Bucket& b : buckets_) PS_RETURN_IF_ERROR(b.handle.Wait());
  last_wait_seconds_ = absl::ToDoubleSeconds(absl::Now() - t0);
  last_workers_with_data_ = static_cast<int>(std::lround(with_data_slot()));
  double total = samples_slot();
  if (total <= 0) return total;
  for (const Table& t : tables_) {
    size_t bad = optim::FindNonFinite(flat_.data() + t.grad_offset, t.spec.size);
    if (bad != t.spec.size) {
      return absl::FailedPreconditionError(absl::StrCat(
          "non-finite summed gradient in table ", t.spec.name, " at element ", bad,
          " (the loss diverged?); parameters left unchanged"));
    }
  }
  float scale = static_cast<float>(1.0 / total);
  for (Table& t : tables_) {
    ++t.step;
    optim::UpdateArgs a;
    a.weights_in = t.weights.data();
    a.weights_out = t.weights.data();
    a.state = t.state.empty() ? nullptr : t.state.data();
    a.state_stride = t.spec.size;
    a.grads = flat_.data() + t.grad_offset;
    a.n = t.spec.size;
    a.scale = scale;
    a.lr_scale = lr_scale;
    a.step = t.step;
    t.optimizer->Apply(a);
  }
  return total;
}

namespace {

// A private temporary file name (the shard format is written through files).
std::string TempPath() {
  char tmpl[] = "/tmp/pstrain-replica-XXXXXX";
  int fd = mkstemp(tmpl);
  if (fd >= 0) close(fd);
  return tmpl;
}

}  // namespace

absl::StatusOr<Buffer> DenseReplica::SerializeState() const {
  std::string path = TempPath();
  auto write = [&]() -> absl::Status {
    PS_ASSIGN_OR_RETURN(auto w, ShardFileWriter::Open(path, 0, 1, static_cast<int>(tables_.size()), 0));
    for (const Table& t : tables_) {
      PS_RETURN_IF_ERROR(w->AddDense(t.spec.id, 0, t.weights, t.state, t.step));
    }
    return w->Finish().status();
  };
  absl::Status st = write();
  absl::StatusOr<std::string> bytes = st.ok() ? ReadFileToString(path) : absl::StatusOr<std::string>(st);
  std::remove(path.c_str());
  if (!bytes.ok()) return bytes.status();
  return Buffer::FromString(*std::move(bytes));
}

absl::Status DenseReplica::RestoreState(const Buffer& image) {
  std::string path = TempPath();
  auto read = [&]() -> absl::Status {
    {
      PS_ASSIGN_OR_RETURN(auto w, AtomicFileWriter::Open(path));
      PS_RETURN_IF_ERROR(w->Append(image.data(), image.size()));
      PS_RETURN_IF_ERROR(w->Commit());
    }
    PS_ASSIGN_OR_RETURN(auto shard, ShardFile::Read(path));
    size_t restored = 0;
    for (const ShardFile::Section& sec : shard->sections()) {
      if (!holds(sec.info.table)) continue;
      Table& t = tables_[slot_[sec.info.table]];
      if (sec.weights.size() != t.weights.size() || sec.state.size() != t.state.size()) {
        return absl::DataLossError(absl::StrCat("worker state of table ", t.spec.name,
                                                " does not match the model"));
      }
      std::copy(sec.weights.begin(), sec.weights.end(), t.weights.begin());
      std::copy(sec.state.begin(), sec.state.end(), t.state.begin());
      t.step = sec.info.step;
      ++restored;
    }
    if (restored != tables_.size()) {
      return absl::DataLossError(absl::StrCat("worker state holds ", restored, " of ",
                                              tables_.size(), " dense tables"));
    }
    return absl::OkStatus();
  };
  absl::Status st = read();
  std::remove(path.c_str());
  return st;
}

}  // namespace pstrain::worker
