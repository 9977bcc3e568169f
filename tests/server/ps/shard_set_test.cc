// ShardSet: a server's shard split among executor threads answers exactly
// as one owner does, in the order requests were queued.
#include "server/ps/shard_set.h"

#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <set>
#include <map>

#include <unistd.h>

#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "cluster/sparse_owner.h"
#include "server/coordinator/table_layout.h"

namespace pstrain::server {
namespace {

constexpr int kServers = 2;
constexpr int kRank = 1;
constexpr uint64_t kBig = 300000;  // floats; cut between parts on each server

std::vector<TableSpec> Tables() {
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.1f;
  OptimizerConfig momentum;
  momentum.kind = OptimizerKind::kSgd;
  momentum.lr = 0.05f;
  momentum.momentum = 0.9f;
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  OptimizerConfig ftrl;
  ftrl.kind = OptimizerKind::kFtrl;
  ftrl.lr = 0.05f;
  std::vector<TableSpec> t(5);
  t[0] = {0, "big", TableKind::kDense, kBig, 0, adagrad, {InitKind::kUniform, 0.1f, 1}};
  t[1] = {1, "small", TableKind::kDense, 7, 0, momentum, {InitKind::kConstant, 0.5f, 1}};
  t[2] = {2, "emb", TableKind::kSparse, 0, 8, adam, {InitKind::kUniform, 0.05f, 2}};
  t[3] = {3, "wide", TableKind::kSparse, 0, 1, ftrl, {InitKind::kUniform, 0.05f, 3}};
  // Two small tables: at least one of them is held whole by this server.
  t[4] = {4, "bias", TableKind::kDense, 3, 0, momentum, {InitKind::kConstant, 0.1f, 1}};
  return t;
}

proto::TableLayout Layout() {
  auto layout = ComputeLayout(Tables(), kServers, /*chunk_floats=*/kBig / 2);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return *layout;
}

// The owner thread of the test: runs what the executors post back.
class Owner {
 public:
  ShardSet::Post post() {
    return [this](absl::AnyInvocable<void()> fn) {
      absl::MutexLock lock(&mu_);
      tasks_.push_back(std::move(fn));
    };
  }
  // Runs posted tasks until `*done` reaches `want` (callbacks count it).
  void RunUntil(const int* done, int want) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (*done < want) {
      std::deque<absl::AnyInvocable<void()>> batch;
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithDeadline(absl::Condition(
                                  +[](std::deque<absl::AnyInvocable<void()>>* q) {
                                    return !q->empty();
                                  },
                                  &tasks_),
                              deadline);
        batch.swap(tasks_);
      }
      ASSERT_FALSE(batch.empty() && absl::Now() > deadline) << "executors stopped answering";
      for (auto& t : batch) t();
    }
  }

 private:
  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<ShardSet> MakeSet(int threads, Owner* owner, proto::TableLayout layout = Layout()) {
  auto set = ShardSet::Create(layout, kRank, threads, owner->post());
  EXPECT_TRUE(set.ok()) << set.status();
  return *std::move(set);
}

// One request's memory: the ops' spans point into it.
struct Request {
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<KvOp> ops;
};

// Builds random pulls and pushes of every table, as a server would see
// them after Validate: dense ranges inside this server's range (often
// crossing the pieces' boundaries), ids this server owns, duplicates.
class Requests {
 public:
  explicit Requests(const ShardSet& set, uint64_t seed) : set_(set), rng_(seed) {
    for (uint64_t id = 0; owned_.size() < 3000; ++id) {
      if (SparseOwner(id, kServers) == kRank) owned_.push_back(id);
    }
  }

  std::shared_ptr<Request> Next(bool push) {
    auto r = std::make_shared<Request>();
    std::uniform_int_distribution<int> coin(0, 3);
    for (uint32_t table = 0; table < 5; ++table) {
      if (coin(rng_) == 0) continue;  // not every request touches every table
      KvOp op;
      op.table = table;
      if (set_.layout().tables[table].kind == TableKind::kDense) {
        const KvStore::Piece range = ServerRange(table);
        if (range.length == 0) continue;  // held by the other server
        std::uniform_int_distribution<uint64_t> at(0, range.length - 1);
        uint64_t a = at(rng_), b = at(rng_);
        if (a > b) std::swap(a, b);
        op.begin = range.begin + a;
        op.count = b - a + 1;
        if (push) AppendGradients(op.count, &r->values);
      } else {
        op.sparse = true;
        std::uniform_int_distribution<size_t> pick(0, owned_.size() - 1);
        op.count = 1 + pick(rng_) % 700;
        for (uint64_t i = 0; i < op.count; ++i) r->ids.push_back(owned_[pick(rng_) % 400 * 7 % owned_.size()]);
        if (push) AppendGradients(op.count * set_.layout().tables[table].dim, &r->values);
      }
      r->ops.push_back(op);
    }
    // Spans last: the vectors no longer grow.
    size_t id_at = 0, value_at = 0;
    for (KvOp& op : r->ops) {
      const size_t n = op.sparse ? op.count * set_.layout().tables[op.table].dim : op.count;
      if (op.sparse) op.ids = std::span<const uint64_t>(r->ids.data() + id_at, op.count);
      id_at += op.sparse ? op.count : 0;
      if (push) op.values = std::span<const float>(r->values.data() + value_at, n);
      value_at += push ? n : 0;
    }
    return r;
  }

 private:
  KvStore::Piece ServerRange(uint32_t table) const {
    for (const proto::DenseRange& r : set_.layout().dense_ranges) {
      if (r.table == table && r.server == kRank) return KvStore::Piece{r.begin, r.length};
    }
    return {};
  }
  void AppendGradients(size_t n, std::vector<float>* out) {
    std::normal_distribution<float> g;
    for (size_t i = 0; i < n; ++i) out->push_back(g(rng_));
  }

  const ShardSet& set_;
  std::mt19937_64 rng_;
  std::vector<uint64_t> owned_;
};

// The bytes of a pull's payloads.
std::vector<std::string> Bytes(const std::vector<Buffer>& values) {
  std::vector<std::string> out;
  for (const Buffer& b : values) out.emplace_back(reinterpret_cast<const char*>(b.data()), b.size());
  return out;
}

// Runs `steps` random requests on `set`, queuing them all before running
// any callback (so pulls and pushes overlap on the executors), and returns
// every pull's bytes in request order.
std::vector<std::vector<std::string>> RunRequests(ShardSet& set, Owner& owner, int steps, uint64_t seed) {
  Requests gen(set, seed);
  std::vector<std::vector<std::string>> pulls;
  int done = 0, queued = 0;
  for (int s = 0; s < steps; ++s) {
    const bool push = s % 3 != 2;
    std::shared_ptr<Request> r = gen.Next(push);
    ++queued;
    if (push) {
      set.Push(r->ops, 1.0f / (1 + s % 4), s, r, [&done](absl::Status st) {
        EXPECT_TRUE(st.ok()) << st;
        ++done;
      });
      continue;
    }
    pulls.emplace_back();
    set.Pull(r->ops, r, [&done, &pulls, slot = pulls.size() - 1](absl::StatusOr<std::vector<Buffer>> v) {
      EXPECT_TRUE(v.ok()) << v.status();
      if (v.ok()) pulls[slot] = Bytes(*v);
      ++done;
    });
  }
  owner.RunUntil(&done, queued);
  return pulls;
}

// Every value this server holds, read through `set`.
std::vector<std::string> Everything(ShardSet& set, Owner& owner) {
  std::vector<uint64_t> ids;
  for (uint64_t id = 0; ids.size() < 3000; ++id) {
    if (SparseOwner(id, kServers) == kRank) ids.push_back(id);
  }
  std::vector<KvOp> ops;
  for (const proto::DenseRange& r : set.layout().dense_ranges) {
    if (r.server != kRank) continue;
    KvOp op;
    op.table = r.table;
    op.begin = r.begin;
    op.count = r.length;
    ops.push_back(op);
  }
  for (uint32_t t : {2u, 3u}) {
    KvOp op;
    op.table = t;
    op.sparse = true;
    op.count = ids.size();
    op.ids = ids;
    ops.push_back(op);
  }
  std::vector<std::string> out;
  int done = 0;
  set.Pull(ops, nullptr, [&](absl::StatusOr<std::vector<Buffer>> v) {
    EXPECT_TRUE(v.ok()) << v.status();
    if (v.ok()) out = Bytes(*v);
    ++done;
  });
  owner.RunUntil(&done, 1);
  return out;
}

TEST(ShardSetPieces, AreContiguousAlignedAndCoverTheRange) {
  for (uint64_t length : {uint64_t{1}, uint64_t{100}, uint64_t{3 * 16384 - 1}, uint64_t{3 * 16384},
                          uint64_t{1000003}}) {
    for (int parts : {1, 2, 3, 8}) {
      uint64_t next = 500, held = 0;
      for (int p = 0; p < parts; ++p) {
        KvStore::Piece piece = KvStore::PieceOf(5, 500, length, p, parts);
        if (piece.length == 0) continue;
        EXPECT_EQ(piece.begin, next) << "length " << length << " part " << p << "/" << parts;
        if (p + 1 < parts && piece.begin + piece.length < 500 + length) {
          EXPECT_EQ((piece.begin + piece.length - 500) % 16, 0u);
        }
        next = piece.begin + piece.length;
        held += piece.length;
      }
      EXPECT_EQ(held, length) << "length " << length << " parts " << parts;
      EXPECT_EQ(next, 500 + length);
    }
  }
}

TEST(ShardSetPieces, SparseRowsSpreadOverEveryPart) {
  std::vector<int> rows(4, 0);
  for (uint64_t id = 0; id < 40000; ++id) {
    if (SparseOwner(id, kServers) == kRank) ++rows[SparseOwnerPart(id, kServers, 4)];
  }
  for (int n : rows) EXPECT_NEAR(n, 5000, 400);
}

class ShardSetThreads : public ::testing::TestWithParam<int> {};

TEST_P(ShardSetThreads, QueuedPullsAndPushesAnswerBitForBitLikeOneOwner) {
  Owner owner;
  int whole = 0;  // the layout gives this server a small table, whole
  for (const proto::DenseRange& r : Layout().dense_ranges) {
    whole += (r.server == kRank && r.length < 16384) ? 1 : 0;
  }
  ASSERT_GT(whole, 0);
  auto one = MakeSet(1, &owner);
  auto split = MakeSet(GetParam(), &owner);
  ASSERT_EQ(split->threads(), GetParam());
  auto expected = RunRequests(*one, owner, 90, 7);
  auto got = RunRequests(*split, owner, 90, 7);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(got[i] == expected[i]) << "pull " << i;
  EXPECT_TRUE(Everything(*split, owner) == Everything(*one, owner));
}

TEST_P(ShardSetThreads, BspSumsOfTheWorkersApplyLikeOneOwner) {
  Owner owner;
  auto one = MakeSet(1, &owner);
  auto split = MakeSet(GetParam(), &owner);
  for (ShardSet* set : {one.get(), split.get()}) {
    Requests gen(*set, 11);
    int done = 0, queued = 0;
    for (int step = 0; step < 6; ++step) {
      for (uint32_t worker = 0; worker < 3; ++worker) {
        auto r = gen.Next(/*push=*/true);
        ++queued;
        set->BspAdd(r->ops, 8 + worker, r, [&done](absl::Status st) {
          EXPECT_TRUE(st.ok()) << st;
          ++done;
        });
      }
      ++queued;
      set->BspApply(step, [&done](absl::Status st) {
        EXPECT_TRUE(st.ok()) << st;
        ++done;
      });
    }
    owner.RunUntil(&done, queued);
  }
  EXPECT_TRUE(Everything(*split, owner) == Everything(*one, owner));
}

TEST_P(ShardSetThreads, CheckpointOfASplitShardRestoresOntoAnyNumberOfThreads) {
  Owner owner;
  auto split = MakeSet(GetParam(), &owner);
  RunRequests(*split, owner, 40, 3);
  // One folder per case: ctest runs the cases in parallel processes.
  const std::string dir = ::testing::TempDir() + "/shard_set_ckpt_" + std::to_string(GetParam()) +
                          "_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/server-1.shard";
  auto saved = split->SaveShard(file, 40);
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_GT(saved->first, kBig / 2 * sizeof(float));
  const auto want = Everything(*split, owner);
  for (int threads : {1, 2, 5}) {
    auto restored = MakeSet(threads, &owner);
    ASSERT_TRUE(restored->Restore({file}).ok());
    EXPECT_TRUE(Everything(*restored, owner) == want) << threads << " threads";
  }
  // A plain store (what restore onto other servers uses) reads it too.
  auto plain = KvStore::Create(Layout(), kRank);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->Restore({file}).ok());
  std::filesystem::remove_all(dir);
}

TEST_P(ShardSetThreads, StatsAndDumpCoverEveryPartOnce) {
  Owner owner;
  auto one = MakeSet(1, &owner);
  auto split = MakeSet(GetParam(), &owner);
  RunRequests(*one, owner, 30, 5);
  RunRequests(*split, owner, 30, 5);
  const std::vector<TableStats> a = one->Stats(), b = split->Stats();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name);
    EXPECT_EQ(a[i].rows, b[i].rows) << a[i].name;
  }
  std::vector<uint64_t> all_ids, ids;
  std::vector<float> values;
  auto total = one->Dump(2, 0, 1 << 20, &all_ids, &values);
  ASSERT_TRUE(total.ok());
  uint64_t rows = 0;
  for (uint64_t offset = 0; offset < *total; offset += 37) {
    size_t before = ids.size();
    auto n = split->Dump(2, offset, 37, &ids, &values);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, *total);
    rows += ids.size() - before;
  }
  EXPECT_EQ(rows, *total);
  std::sort(all_ids.begin(), all_ids.end());
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, all_ids);
}

// Pages of a versioned export (DumpExport), as the lead reads them.
struct Export {
  std::map<uint64_t, std::vector<float>> rows;
  std::set<uint64_t> removed;
  uint64_t entries = 0;
};

absl::StatusOr<Export> ReadExport(ShardSet& set, proto::DumpMode mode, uint64_t seq,
                                  uint64_t since, uint32_t table, uint32_t dim) {
  Export out;
  proto::DumpRequest request;
  request.table = table;
  request.max_rows = 37;
  request.mode = mode;
  request.seq = seq;
  request.since = since;
  do {
    std::vector<uint64_t> ids, removed;
    std::vector<float> values;
    absl::StatusOr<uint64_t> n = set.DumpExport(request, &ids, &values, &removed);
    if (!n.ok()) return n.status();
    if (request.offset == 0) out.entries = *n;
    EXPECT_EQ(*n, out.entries) << "the cut changed between pages";
    EXPECT_LE(ids.size() + removed.size(), request.max_rows);
    for (size_t i = 0; i < ids.size(); ++i) {
      EXPECT_TRUE(out.rows.emplace(ids[i], std::vector<float>(values.begin() + i * dim,
                                                              values.begin() + (i + 1) * dim))
                      .second)
          << "row " << ids[i] << " on two pages";
    }
    out.removed.insert(removed.begin(), removed.end());
    request.offset += ids.size() + removed.size();
    if (ids.empty() && removed.empty()) break;
  } while (request.offset < out.entries);
  EXPECT_EQ(request.offset, out.entries);
  return out;
}

// Every row of `table` by a plain dump (which cuts nothing).
std::map<uint64_t, std::vector<float>> TableNow(ShardSet& set, uint32_t table, uint32_t dim) {
  std::vector<uint64_t> ids;
  std::vector<float> values;
  EXPECT_TRUE(set.Dump(table, 0, 1 << 20, &ids, &values).ok());
  std::map<uint64_t, std::vector<float>> rows;
  for (size_t i = 0; i < ids.size(); ++i) {
    rows[ids[i]].assign(values.begin() + i * dim, values.begin() + (i + 1) * dim);
  }
  return rows;
}

TEST_P(ShardSetThreads, ABaseAndTheDeltasAfterItGiveTheTableAsItIs) {
  Owner owner;
  auto split = MakeSet(GetParam(), &owner);
  const uint32_t table = 2, dim = 8;
  RunRequests(*split, owner, 20, 21);
  // No base yet: a delta is refused.
  auto early = ReadExport(*split, proto::DumpMode::kChanged, 1, 0, table, dim);
  EXPECT_EQ(early.status().code(), absl::StatusCode::kFailedPrecondition) << early.status();
  auto base = ReadExport(*split, proto::DumpMode::kAll, 1, 0, table, dim);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_TRUE(base->rows == TableNow(*split, table, dim));
  std::map<uint64_t, std::vector<float>> applied = base->rows;
  for (uint64_t seq = 2; seq <= 5; ++seq) {
    RunRequests(*split, owner, 4, 100 + seq);
    auto delta = ReadExport(*split, proto::DumpMode::kChanged, seq, seq - 1, table, dim);
    ASSERT_TRUE(delta.ok()) << delta.status();
    EXPECT_LT(delta->rows.size(), applied.size()) << "a delta of a few pushes is not every row";
    for (auto& [id, values] : delta->rows) applied[id] = values;
    for (uint64_t id : delta->removed) applied.erase(id);
    EXPECT_TRUE(applied == TableNow(*split, table, dim)) << "after delta " << seq;
  }
  // A new base restarts tracking: a delta since an export before it is refused.
  ASSERT_TRUE(ReadExport(*split, proto::DumpMode::kAll, 6, 0, table, dim).ok());
  EXPECT_EQ(ReadExport(*split, proto::DumpMode::kChanged, 7, 5, table, dim).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto after = ReadExport(*split, proto::DumpMode::kChanged, 7, 6, table, dim);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->entries, 0u);
}

INSTANTIATE_TEST_SUITE_P(Threads, ShardSetThreads, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return "T" + std::to_string(info.param);
                         });

TEST(ShardSet, RefusesABadThreadCount) {
  Owner owner;
  EXPECT_FALSE(ShardSet::Create(Layout(), kRank, 0, owner.post()).ok());
  EXPECT_FALSE(ShardSet::Create(Layout(), kRank, ShardSet::kMaxThreads + 1, owner.post()).ok());
}

}  // namespace
}  // namespace pstrain::server
