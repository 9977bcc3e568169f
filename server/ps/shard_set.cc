#include "server/ps/shard_set.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cluster/sparse_owner.h"

namespace pstrain::server {

// One executor thread: runs the tasks queued to it, in order, in batches
// (one wake-up for everything queued while it was busy).
class ShardSet::Executor {
 public:
  explicit Executor(int index) : thread_([this, index] { Loop(index); }) {}
  // Runs what is queued, then stops.
  ~Executor() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  void Enqueue(absl::AnyInvocable<void()> task) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(task));
  }

 private:
  void Loop(int index) {
    const std::string name = absl::StrCat("ps-shard-", index);
    pthread_setname_np(pthread_self(), name.c_str());
    std::vector<absl::AnyInvocable<void()>> batch;
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Executor* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu_) {
              return e->stop_ || !e->queue_.empty();
            },
            this));
        if (queue_.empty()) return;
        batch.swap(queue_);
      }
      for (auto& task : batch) task();
      batch.clear();
    }
  }

  absl::Mutex mu_;
  std::vector<absl::AnyInvocable<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the rest is built
};

// One request in flight on the executors.
struct ShardSet::Job {
  std::atomic<int> remaining{0};
  std::shared_ptr<const void> keep;  // the request the ops point into
  // Pull: one payload per op. out_data[k] is the writable base of an
  // assembled payload, or null when one part's snapshot is the payload.
  std::vector<Buffer> out;
  std::vector<float*> out_data;
  absl::AnyInvocable<void()> finish;  // on the owner thread, once

  void Fail(absl::Status st) {
    absl::MutexLock lock(&mu);
    if (status.ok()) status = std::move(st);
  }
  absl::Status TakeStatus() {
    absl::MutexLock lock(&mu);
    return status;
  }

 private:
  absl::Mutex mu;
  absl::Status status ABSL_GUARDED_BY(mu);
};

// One part's share of a request.
struct ShardSet::PartWork {
  std::vector<KvOp> ops;
  // Pull: the payload each op fills, where in it (floats, dense), and for a
  // sparse op cut between parts the row each id goes to (empty: in order).
  std::vector<uint32_t> out_index;
  std::vector<uint64_t> out_offset;
  std::vector<std::vector<uint32_t>> positions;
  // The ids and gradients of sparse ops cut between parts (the ops' spans
  // point here; moving a vector keeps its elements in place).
  std::vector<std::vector<uint64_t>> ids;
  std::vector<std::vector<float>> grads;
};

absl::StatusOr<std::unique_ptr<ShardSet>> ShardSet::Create(const proto::TableLayout& layout,
                                                           int rank, int threads, Post post,
                                                           const TierConfig& tier) {
  if (threads < 1 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(
        absl::StrCat("server threads must be in [1, ", kMaxThreads, "], not ", threads));
  }
  std::unique_ptr<ShardSet> set(new ShardSet(std::move(post)));
  for (int p = 0; p < threads; ++p) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> part,
                        KvStore::Create(layout, rank, p, threads, tier));
    set->bsp_.push_back(std::make_unique<BspAggregator>(part.get()));
    set->parts_.push_back(std::move(part));
  }
  set->scratch_.resize(threads);
  if (threads > 1 || tier.enabled()) {
    for (int p = 0; p < threads; ++p) set->executors_.push_back(std::make_unique<Executor>(p));
  }
  return set;
}

ShardSet::ShardSet(Post post) : post_(std::move(post)) {}

ShardSet::~ShardSet() { executors_.clear(); }

std::vector<ShardSet::PartWork> ShardSet::Cut(const std::vector<KvOp>& ops, bool pull,
                                              Job* job) const {
  const int parts = threads();
  const proto::TableLayout& layout = this->layout();
  std::vector<PartWork> work(parts);
  if (pull) {
    job->out.resize(ops.size());
    job->out_data.assign(ops.size(), nullptr);
  }
  auto add = [&](int p, const KvOp& op, uint32_t k, uint64_t offset) {
    work[p].ops.push_back(op);
    if (!pull) return;
    work[p].out_index.push_back(k);
    work[p].out_offset.push_back(offset);
    work[p].positions.emplace_back();
  };
  std::vector<int> part_of;
  std::vector<uint32_t> count(parts);
  for (size_t k = 0; k < ops.size(); ++k) {
    const KvOp& op = ops[k];
    const auto index = static_cast<uint32_t>(k);
    if (!op.sparse) {
      const KvStore::Piece range = parts_[0]->server_range(op.table);
      int cut = 0;
      for (int p = 0; p < parts; ++p) {
        const KvStore::Piece piece = KvStore::PieceOf(op.table, range.begin, range.length, p, parts);
        const uint64_t lo = std::max(op.begin, piece.begin);
        const uint64_t hi = std::min(op.begin + op.count, piece.begin + piece.length);
        if (lo >= hi) continue;
        KvOp sub = op;
        sub.begin = lo;
        sub.count = hi - lo;
        if (!op.values.empty()) sub.values = op.values.subspan(lo - op.begin, hi - lo);
        add(p, sub, index, lo - op.begin);
        ++cut;
      }
      if (pull && cut > 1) {
        uint8_t* dst = nullptr;
        job->out[k] = Buffer::Allocate(op.count * sizeof(float), &dst);
        job->out_data[k] = reinterpret_cast<float*>(dst);
      }
      continue;
    }
    const size_t dim = layout.tables[op.table].dim;
    if (pull) {
      uint8_t* dst = nullptr;
      job->out[k] = Buffer::Allocate(op.ids.size() * dim * sizeof(float), &dst);
      job->out_data[k] = reinterpret_cast<float*>(dst);
    }
    part_of.resize(op.ids.size());
    std::fill(count.begin(), count.end(), 0);
    for (size_t i = 0; i < op.ids.size(); ++i) {
      part_of[i] = SparseOwnerPart(op.ids[i], layout.num_servers, parts);
      ++count[part_of[i]];
    }
    for (int p = 0; p < parts; ++p) {
      if (count[p] == 0) continue;
      if (count[p] == op.ids.size()) {  // all in one part: no copy
        add(p, op, index, 0);
        continue;
      }
      std::vector<uint64_t> ids;
      std::vector<uint32_t> positions;
      std::vector<float> grads;
      ids.reserve(count[p]);
      if (pull) positions.reserve(count[p]);
      if (!op.values.empty()) grads.reserve(count[p] * dim);
      for (size_t i = 0; i < op.ids.size(); ++i) {
        if (part_of[i] != p) continue;
        ids.push_back(op.ids[i]);
        if (pull) positions.push_back(static_cast<uint32_t>(i));
        if (!op.values.empty()) {
          grads.insert(grads.end(), op.values.begin() + i * dim, op.values.begin() + (i + 1) * dim);
        }
      }
      KvOp sub = op;
      sub.count = ids.size();
      sub.ids = ids;
      sub.values = grads;
      add(p, sub, index, 0);
      if (pull) work[p].positions.back() = std::move(positions);
      work[p].ids.push_back(std::move(ids));
      work[p].grads.push_back(std::move(grads));
    }
  }
  return work;
}

void ShardSet::Dispatch(std::shared_ptr<Job> job, std::vector<PartWork> work, bool all,
                        std::function<absl::Status(int part, PartWork& w)> run) {
  int queued = 0;
  for (const PartWork& w : work) queued += (all || !w.ops.empty()) ? 1 : 0;
  if (queued == 0) {
    job->finish();
    return;
  }
  job->remaining.store(queued, std::memory_order_relaxed);
  auto shared_run = std::make_shared<decltype(run)>(std::move(run));
  for (size_t p = 0; p < work.size(); ++p) {
    if (!all && work[p].ops.empty()) continue;
    executors_[p]->Enqueue(
        [this, job, shared_run, w = std::move(work[p]), p = static_cast<int>(p)]() mutable {
          absl::Status st = (*shared_run)(p, w);
          if (!st.ok()) job->Fail(std::move(st));
          if (job->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            post_([job] { job->finish(); });
          }
        });
  }
}

void ShardSet::Pull(const std::vector<KvOp>& ops, std::shared_ptr<const void> keep, PullDone done) {
  if (executors_.empty()) {
    std::vector<Buffer> out;
    absl::Status st = parts_[0]->Pull(ops, &out);
    if (!st.ok()) return done(st);
    return done(std::move(out));
  }
  auto job = std::make_shared<Job>();
  job->keep = std::move(keep);
  std::vector<PartWork> work = Cut(ops, /*pull=*/true, job.get());
  Job* j = job.get();
  job->finish = [j, done = std::move(done)]() mutable {
    absl::Status st = j->TakeStatus();
    if (!st.ok()) return done(st);
    done(std::move(j->out));
  };
  Dispatch(std::move(job), std::move(work), /*all=*/false, [this, j](int p, PartWork& w) {
    KvStore& store = *parts_[p];
    std::vector<float>& scratch = scratch_[p];
    for (size_t i = 0; i < w.ops.size(); ++i) {
      const KvOp& op = w.ops[i];
      const uint32_t k = w.out_index[i];
      if (!op.sparse) {
        const DenseShard& d = *store.dense(op.table);
        if (j->out_data[k] == nullptr) {
          PS_ASSIGN_OR_RETURN(j->out[k], d.Snapshot(op.begin, op.count));
        } else {
          std::copy_n(d.weights().data() + (op.begin - d.offset()), op.count,
                      j->out_data[k] + w.out_offset[i]);
        }
        continue;
      }
      SparseTable& t = *store.sparse(op.table);
      const std::vector<uint32_t>& positions = w.positions[i];
      if (positions.empty()) {
        PS_RETURN_IF_ERROR(t.Pull(op.ids, j->out_data[k]));
        continue;
      }
      const size_t dim = t.dim();
      scratch.resize(op.ids.size() * dim);
      PS_RETURN_IF_ERROR(t.Pull(op.ids, scratch.data()));
      for (size_t r = 0; r < positions.size(); ++r) {
        std::copy_n(scratch.data() + r * dim, dim, j->out_data[k] + size_t{positions[r]} * dim);
      }
    }
    return absl::OkStatus();
  });
}

void ShardSet::Push(const std::vector<KvOp>& ops, float scale, int64_t step,
                    std::shared_ptr<const void> keep, Done done) {
  if (executors_.empty()) return done(parts_[0]->Push(ops, scale, step));
  auto job = std::make_shared<Job>();
  job->keep = std::move(keep);
  std::vector<PartWork> work = Cut(ops, /*pull=*/false, job.get());
  Job* j = job.get();
  job->finish = [j, done = std::move(done)]() mutable { done(j->TakeStatus()); };
  Dispatch(std::move(job), std::move(work), /*all=*/false, [this, scale, step](int p, PartWork& w) {
    return parts_[p]->Push(w.ops, scale, step);
  });
}

void ShardSet::BspAdd(const std::vector<KvOp>& ops, uint32_t num_samples,
                      std::shared_ptr<const void> keep, Done done) {
  if (executors_.empty()) {
    bsp_[0]->Add(ops, num_samples);
    return done(absl::OkStatus());
  }
  // Parts see only the pushes that touch them: the samples are counted here.
  bsp_samples_ += num_samples;
  auto job = std::make_shared<Job>();
  job->keep = std::move(keep);
  std::vector<PartWork> work = Cut(ops, /*pull=*/false, job.get());
  Job* j = job.get();
  job->finish = [j, done = std::move(done)]() mutable { done(j->TakeStatus()); };
  Dispatch(std::move(job), std::move(work), /*all=*/false, [this](int p, PartWork& w) {
    bsp_[p]->Add(w.ops, 0);
    return absl::OkStatus();
  });
}

void ShardSet::BspApply(int64_t step, Done done) {
  if (executors_.empty()) return done(bsp_[0]->Apply(step));
  const uint64_t samples = std::exchange(bsp_samples_, 0);
  auto job = std::make_shared<Job>();
  Job* j = job.get();
  job->finish = [j, done = std::move(done)]() mutable { done(j->TakeStatus()); };
  Dispatch(std::move(job), std::vector<PartWork>(parts_.size()), /*all=*/samples > 0,
           [this, step, samples](int p, PartWork&) { return bsp_[p]->Apply(step, samples); });
}

absl::Status ShardSet::OnEveryPart(const std::function<absl::Status(int part)>& fn) {
  if (executors_.empty()) return fn(0);
  struct Wait {
    absl::Mutex mu;
    int left ABSL_GUARDED_BY(mu) = 0;
    absl::Status status ABSL_GUARDED_BY(mu);
  } wait;
  {
    absl::MutexLock lock(&wait.mu);
    wait.left = threads();
  }
  for (int p = 0; p < threads(); ++p) {
    executors_[p]->Enqueue([&wait, &fn, p] {
      absl::Status st = fn(p);
      absl::MutexLock lock(&wait.mu);
      if (wait.status.ok()) wait.status = std::move(st);
      --wait.left;
    });
  }
  absl::MutexLock lock(&wait.mu);
  wait.mu.Await(absl::Condition(
      +[](Wait* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu) { return w->left == 0; }, &wait));
  return wait.status;
}

void ShardSet::Exclusive(absl::FunctionRef<void()> fn) {
  if (executors_.empty()) return fn();
  struct Gate {
    absl::Mutex mu;
    int arrived ABSL_GUARDED_BY(mu) = 0;
    int need = 0;
    bool open ABSL_GUARDED_BY(mu) = false;
  };
  auto gate = std::make_shared<Gate>();
  gate->need = threads();
  for (auto& e : executors_) {
    e->Enqueue([gate] {
      absl::MutexLock lock(&gate->mu);
      ++gate->arrived;
      gate->mu.Await(absl::Condition(&gate->open));
    });
  }
  {
    absl::MutexLock lock(&gate->mu);
    gate->mu.Await(absl::Condition(
        +[](Gate* g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(g->mu) { return g->arrived == g->need; },
        gate.get()));
  }
  fn();
  absl::MutexLock lock(&gate->mu);
  gate->open = true;
}

absl::StatusOr<std::pair<uint64_t, std::string>> ShardSet::SaveShard(const std::string& path,
                                                                     uint64_t step) {
  absl::StatusOr<std::pair<uint64_t, std::string>> result = absl::UnknownError("not run");
  Exclusive([&] {
    std::vector<const KvStore*> parts;
    for (const auto& p : parts_) parts.push_back(p.get());
    result = KvStore::SaveShard(parts, path, step);
  });
  return result;
}

absl::Status ShardSet::Restore(const std::vector<std::string>& shard_files) {
  return OnEveryPart([&](int p) { return parts_[p]->Restore(shard_files); });
}

absl::StatusOr<uint64_t> ShardSet::Dump(uint32_t table, uint64_t offset, uint64_t max_rows,
                                        std::vector<uint64_t>* ids, std::vector<float>* values) {
  absl::StatusOr<uint64_t> total = uint64_t{0};
  Exclusive([&] {
    uint64_t rows = 0;
    const size_t initial = ids->size();
    for (const auto& part : parts_) {
      const uint64_t taken = ids->size() - initial;
      const uint64_t skip = offset > rows ? offset - rows : 0;
      const uint64_t want = max_rows > taken ? max_rows - taken : 0;
      absl::StatusOr<uint64_t> n = part->Dump(table, skip, want, ids, values);
      if (!n.ok()) {
        total = n.status();
        return;
      }
      rows += *n;
    }
    total = rows;
  });
  return total;
}

std::vector<TableStats> ShardSet::Stats() {
  std::vector<std::vector<TableStats>> per_part(parts_.size());
  (void)OnEveryPart([&](int p) {
    per_part[p] = parts_[p]->Stats();
    return absl::OkStatus();
  });
  if (per_part.size() == 1) return std::move(per_part[0]);
  std::vector<TableStats> out;
  for (const TableSpec& spec : layout().tables) {
    if (!holds(spec.id)) continue;
    TableStats sum;
    sum.name = spec.name;
    sum.sparse = spec.kind == TableKind::kSparse;
    for (const auto& stats : per_part) {
      for (const TableStats& s : stats) {
        if (s.name != spec.name) continue;
        sum.rows += s.rows;
        sum.bytes += s.bytes;
        sum.index_bytes += s.index_bytes;
        sum.scratch_bytes += s.scratch_bytes;
        sum.value_bytes += s.value_bytes;
        sum.state_bytes += s.state_bytes;
        sum.sketch_bytes += s.sketch_bytes;
        sum.admitted += s.admitted;
        sum.refused_ids += s.refused_ids;
        sum.refused_pushes += s.refused_pushes;
        sum.evicted_capacity += s.evicted_capacity;
        sum.evicted_ttl += s.evicted_ttl;
      }
    }
    out.push_back(sum);
  }
  return out;
}

}  // namespace pstrain::server
