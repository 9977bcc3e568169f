// ShardSet: this server's shard of every table, owned by one thread or split
// among executor threads (--server_threads), in the manner of Seastar's
// sharded services: work goes to the thread that owns the data instead of
// locking shared state.
//
// With one thread the shard lives on the caller's thread (the server's I/O
// thread) and every call completes before it returns: no hand-over, no
// wake-up. With T > 1, executor p owns part p (a KvStore part: the sparse
// rows with SparseOwnerPart(id) == p and piece p of each dense range) and its
// own BSP sums, so no lock guards table data. The I/O thread cuts each
// request into per-part ops and queues them to their owners only; the owner
// that finishes last hands the result back through `post` (onto the I/O
// thread). Each executor runs its queue in order and the I/O thread queues
// in arrival order, so every part sees the requests in one order: a pull
// queued after a push (or a BSP apply) reads its effect on every part.
//
// Pulls of a dense range that one part holds whole stay zero-copy (the
// part's snapshot is the reply); a range cut between parts is assembled
// into one buffer by the parts in parallel. Sparse ids are grouped per
// part, which copies ids and gradients once.
//
// Failure atomicity: a push is refused by each part before that part
// changes, but parts apply independently. The server therefore scans every
// gradient for NaN/Inf before queuing when T > 1; what is left (a part's
// row cap, a sum of duplicates that overflows) may change some parts only.
//
// Thread-safety: every method is called from one thread (the owner: the
// server's I/O thread); callbacks run on it too. The destructor waits for
// queued work; callbacks it posts may still run after it returns.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/ps/bsp_aggregator.h"
#include "server/ps/kv_store.h"

namespace pstrain::server {

class ShardSet {
 public:
  // Runs a task on the owner thread (never blocks).
  using Post = std::function<void(absl::AnyInvocable<void()>)>;
  using PullDone = absl::AnyInvocable<void(absl::StatusOr<std::vector<Buffer>>)>;
  using Done = absl::AnyInvocable<void(absl::Status)>;

  static constexpr int kMaxThreads = 64;

  // `threads` in [1, kMaxThreads]; `post` is used only when threads > 1 or
  // with a disk tier (`tier`, KvStore::Create): then even one part runs on
  // an executor thread, so that no disk read blocks the I/O thread.
  static absl::StatusOr<std::unique_ptr<ShardSet>> Create(const proto::TableLayout& layout,
                                                          int rank, int threads, Post post,
                                                          const TierConfig& tier = {});
  ~ShardSet();

  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  const proto::TableLayout& layout() const { return parts_[0]->layout(); }
  int threads() const { return static_cast<int>(parts_.size()); }
  bool holds(uint32_t table) const { return parts_[0]->holds(table); }

  // Checks a pull/push request against the whole server's shard.
  absl::StatusOr<std::vector<KvOp>> Validate(const proto::Decoded& request,
                                             const proto::KvRequest& body, bool is_push) const {
    return parts_[0]->Validate(request, body, is_push);
  }

  // The asynchronous operations. `keep` owns the memory the ops point into
  // (the request) and is held until `done` has run. `done` runs exactly
  // once: before the call returns with one thread, else on the owner thread.
  //
  // Reads the parts: one payload per op, as KvStore::Pull.
  void Pull(const std::vector<KvOp>& ops, std::shared_ptr<const void> keep, PullDone done);
  // Applies gradients, as KvStore::Push.
  void Push(const std::vector<KvOp>& ops, float scale, int64_t step, std::shared_ptr<const void> keep,
            Done done);
  // BSP: adds one worker's push to the step's sums (BspAggregator::Add).
  void BspAdd(const std::vector<KvOp>& ops, uint32_t num_samples, std::shared_ptr<const void> keep,
              Done done);
  // BSP: applies the step's sums and clears them (BspAggregator::Apply).
  void BspApply(int64_t step, Done done);

  // Blocking operations: they wait for the work queued before them and see
  // every part at one point in that order.
  absl::StatusOr<std::pair<uint64_t, std::string>> SaveShard(const std::string& path,
                                                             uint64_t step);
  // KvStore::Restore on every part (in parallel with T > 1).
  absl::Status Restore(const std::vector<std::string>& shard_files);
  // KvStore::Dump over the parts in part order.
  absl::StatusOr<uint64_t> Dump(uint32_t table, uint64_t offset, uint64_t max_rows,
                                std::vector<uint64_t>* ids, std::vector<float>* values);
  // A versioned export's page (proto::DumpRequest with seq > 0): at offset
  // 0 every part's change log is cut first; kAll pages as Dump, kChanged
  // through the cut's entries (KvStore::DumpChanges) over the parts in part
  // order. Returns the entries of the server.
  absl::StatusOr<uint64_t> DumpExport(const proto::DumpRequest& request,
                                      std::vector<uint64_t>* ids, std::vector<float>* values,
                                      std::vector<uint64_t>* removed);
  // KvStore::Stats summed over the parts.
  std::vector<TableStats> Stats();

 private:
  class Executor;
  struct Job;
  struct PartWork;

  explicit ShardSet(Post post);

  // Cuts ops into per-part work; `pull` also plans the reply payloads.
  std::vector<PartWork> Cut(const std::vector<KvOp>& ops, bool pull, Job* job) const;
  // Queues `work` to the parts that have some (all parts when `all`), then
  // `finish` on the owner thread once every queued part has run `run`.
  void Dispatch(std::shared_ptr<Job> job, std::vector<PartWork> work, bool all,
                std::function<absl::Status(int part, PartWork& w)> run);
  // Runs fn(part) on every part's thread and waits; the first error.
  absl::Status OnEveryPart(const std::function<absl::Status(int part)>& fn);
  // Runs fn on the calling thread while every executor waits.
  void Exclusive(absl::FunctionRef<void()> fn);

  Post post_;
  std::vector<std::unique_ptr<KvStore>> parts_;
  std::vector<std::unique_ptr<BspAggregator>> bsp_;  // by part
  std::vector<std::unique_ptr<Executor>> executors_;  // empty with one thread
  std::vector<std::vector<float>> scratch_;           // by part: its executor's alone
  uint64_t bsp_samples_ = 0;                          // summed over parts (T > 1)
};

}  // namespace pstrain::server
