// The parameter server seen through real clients on an in-process network:
// tables, placement, optimizers applied on push, validation of bad pushes.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include <gtest/gtest.h>

#include "cluster/sparse_owner.h"
#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

std::vector<float> PullDense(worker::KvClient& kv, uint32_t table, int64_t clock = 0) {
  auto r = kv.Pull({table}, {}, clock).Wait();
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  auto v = (*r)[0].as<float>();
  return std::vector<float>(v.begin(), v.end());
}

std::vector<float> PullSparse(worker::KvClient& kv, uint32_t table, const std::vector<uint64_t>& ids,
                              uint32_t dim, int64_t clock = 0) {
  std::vector<float> out(ids.size() * dim);
  auto r = kv.Pull({}, {worker::SparsePull{table, ids, out.data()}}, clock).Wait();
  EXPECT_TRUE(r.ok()) << r.status();
  return out;
}

Buffer Floats(std::vector<float> v) { return Buffer::FromVector(std::move(v)); }

TEST(PsCluster, DensePushAppliesSgdScaledBySampleCount) {
  TestCluster c(1, 1);
  InitializerConfig init{InitKind::kConstant, 1.0f, 0};
  c.DefineTables({DenseSpec(0, "w", 4, Sgd(0.5f), init)});
  EXPECT_EQ(PullDense(c.kv(0), 0), (std::vector<float>{1, 1, 1, 1}));
  // Gradient summed over 2 samples: the server applies lr * g / 2.
  ASSERT_TRUE(c.kv(0).Push({{0, Floats({2, 4, 0, -2})}}, {}, 2, 0).Wait().ok());
  EXPECT_EQ(PullDense(c.kv(0), 0, 1), (std::vector<float>{0.5f, 0.0f, 1.0f, 1.5f}));
}

TEST(PsCluster, LargeDenseTableIsSplitAcrossServersAndReassembled) {
  TestCluster c(3, 1, proto::Consistency::kAsp, 0, /*chunk=*/100);
  InitializerConfig init{InitKind::kUniform, 0.1f, 7};
  c.DefineTables({DenseSpec(0, "big", 1000, Sgd(1.0f), init), DenseSpec(1, "small", 10, Sgd(1.0f), init)});
  int pieces = 0;
  for (const auto& r : c.kv(0).layout().dense_ranges) pieces += r.table == 0;
  EXPECT_EQ(pieces, 3);
  std::vector<float> before = PullDense(c.kv(0), 0);
  ASSERT_EQ(before.size(), 1000u);
  std::vector<float> g(1000);
  for (int i = 0; i < 1000; ++i) g[i] = 0.001f * i;
  ASSERT_TRUE(c.kv(0).Push({{0, Floats(g)}}, {}, 1, 0).Wait().ok());
  std::vector<float> after = PullDense(c.kv(0), 0, 1);
  for (int i = 0; i < 1000; ++i) EXPECT_NEAR(after[i], before[i] - g[i], 1e-6) << i;
}

TEST(PsCluster, SparseRowsDoNotDependOnTheNumberOfServers) {
  InitializerConfig init{InitKind::kUniform, 0.05f, 3};
  std::vector<uint64_t> ids = {1, 99, 12345678901ULL, 7, 1, 42};
  std::vector<float> one, three;
  {
    TestCluster c(1, 1);
    c.DefineTables({SparseSpec(0, "emb", 8, Sgd(0.1f), init)});
    one = PullSparse(c.kv(0), 0, ids, 8);
  }
  {
    TestCluster c(3, 1);
    c.DefineTables({SparseSpec(0, "emb", 8, Sgd(0.1f), init)});
    three = PullSparse(c.kv(0), 0, ids, 8);
  }
  EXPECT_EQ(one, three);
  // The duplicate id got the same row both times.
  EXPECT_TRUE(std::equal(one.begin(), one.begin() + 8, one.begin() + 32));
}

TEST(PsCluster, SparsePushUpdatesOnlyTheGivenRowsOnEveryServer) {
  TestCluster c(2, 1);
  InitializerConfig init{InitKind::kConstant, 0.0f, 0};
  c.DefineTables({SparseSpec(0, "emb", 2, Sgd(1.0f), init)});
  std::vector<uint64_t> ids;
  std::vector<float> g;
  for (uint64_t i = 0; i < 50; ++i) {
    ids.push_back(i * 7919);
    g.push_back(static_cast<float>(i));
    g.push_back(-static_cast<float>(i));
  }
  ASSERT_TRUE(c.kv(0).Push({}, {{0, ids, Floats(g)}}, 1, 0).Wait().ok());
  std::vector<uint64_t> query = ids;
  query.push_back(5);  // never pushed
  std::vector<float> rows = PullSparse(c.kv(0), 0, query, 2, 1);
  for (size_t i = 0; i < 50; ++i) {
    EXPECT_FLOAT_EQ(rows[2 * i], -static_cast<float>(i));
    EXPECT_FLOAT_EQ(rows[2 * i + 1], static_cast<float>(i));
  }
  EXPECT_EQ(rows[100], 0.0f);
  EXPECT_GT(c.server(0).stats().pushes, 0u);
  EXPECT_GT(c.server(1).stats().pushes, 0u);
}

TEST(PsCluster, NonFiniteGradientIsRefusedAndLeavesTheTableUnchanged) {
  TestCluster c(1, 1);
  InitializerConfig init{InitKind::kConstant, 1.0f, 0};
  c.DefineTables({DenseSpec(0, "w", 3, Sgd(0.5f), init), SparseSpec(1, "emb", 2, Sgd(1.0f), init)});
  std::vector<uint64_t> ids = {4};
  // The dense part is fine, the sparse part has a NaN: nothing may change.
  absl::Status st = c.kv(0)
                        .Push({{0, Floats({1, 1, 1})}}, {{1, ids, Floats({1.0f, NAN})}}, 1, 0)
                        .Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("emb"), std::string::npos) << st;
  EXPECT_EQ(PullDense(c.kv(0), 0), (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(PullSparse(c.kv(0), 1, ids, 2), (std::vector<float>{1, 1}));
  st = c.kv(0).Push({{0, Floats({INFINITY, 0, 0})}}, {}, 1, 0).Wait();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PullDense(c.kv(0), 0), (std::vector<float>{1, 1, 1}));
}

// Sends a hand-made push to server 0 (bypassing the client's routing).
absl::Status RawPush(TestWorker& w, const proto::KvRequest& body, std::vector<Buffer> payloads,
                     std::vector<proto::DType> types) {
  proto::Header h;
  h.type = proto::MsgType::kPush;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = 0;
  h.step = 0;
  PeerId p = w.node->Connect("server0");
  auto reply = w.node->Call(p, proto::Encode(h, body, std::move(payloads), types),
                            absl::Now() + absl::Seconds(10))
                   .Wait();
  return proto::DecodeReply(std::move(reply), "raw push").status();
}

TEST(PsCluster, MisroutedOrMisshapenPushesGetClearErrors) {
  TestCluster c(2, 1, proto::Consistency::kAsp, 0, /*chunk=*/4);
  c.DefineTables({DenseSpec(0, "w", 10, Sgd(1.0f)), SparseSpec(1, "emb", 4, Sgd(1.0f))});
  TestWorker& w = c.worker(0);
  // An id server 0 does not own.
  uint64_t foreign = 0;
  while (SparseOwner(foreign, 2) != 1) ++foreign;
  proto::KvRequest body;
  body.num_samples = 1;
  body.parts = {{1, 0, 1}};
  absl::Status st = RawPush(w, body, {Buffer::FromVector(std::vector<uint64_t>{foreign}),
                                      Floats({1, 2, 3, 4})},
                            {proto::DType::kU64, proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  // Wrong row width for the table's dim.
  uint64_t mine = 0;
  while (SparseOwner(mine, 2) != 0) ++mine;
  st = RawPush(w, body, {Buffer::FromVector(std::vector<uint64_t>{mine}), Floats({1, 2, 3})},
               {proto::DType::kU64, proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("emb"), std::string::npos);
  // A dense range server 0 does not hold.
  body.parts = {{0, 5, 5}};
  st = RawPush(w, body, {Floats({1, 1, 1, 1, 1})}, {proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  // A table that does not exist.
  body.parts = {{9, 0, 1}};
  st = RawPush(w, body, {Floats({1})}, {proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
}

TEST(PsCluster, AServerWritingACheckpointAnswersPingsAndServesWaitingRequestsAfter) {
  TestCluster c(1, 1);
  InitializerConfig init{InitKind::kConstant, 0.25f, 0};
  c.DefineTables({SparseSpec(0, "emb", 16, Sgd(0.1f), init)});
  // 1.3 M rows (a 100 MB shard): writing it takes far longer than a ping.
  std::vector<uint64_t> ids(1 << 16);
  for (uint64_t b = 0; b < 20; ++b) {
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = b << 16 | i;
    ASSERT_EQ(PullSparse(c.kv(0), 0, ids, 16).size(), ids.size() * 16);
  }
  const std::string dir = ::testing::TempDir() + "/pstrain-busy-save-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  TestWorker& w = c.worker(0);
  const PeerId server = w.node->Connect("server0");
  proto::Header save_header;
  save_header.type = proto::MsgType::kSaveShard;
  save_header.sender_role = proto::Role::kCoordinator;
  RpcFuture save = w.node->Call(server, proto::Encode(save_header, proto::SaveShardRequest{dir, 1}),
                                absl::Now() + absl::Seconds(120));
  proto::Header ping_header;
  ping_header.type = proto::MsgType::kPing;
  ping_header.sender_role = proto::Role::kWorker;
  RpcFuture ping = w.node->Call(server, proto::EncodeHeaderOnly(ping_header),
                                absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(ping.Wait().ok());
  // The write runs off the I/O thread: the ping did not wait for it.
  EXPECT_FALSE(save.Ready()) << "the ping was answered only after the checkpoint was written";
  // A pull sent meanwhile waits for the write and is then served.
  EXPECT_EQ(PullSparse(c.kv(0), 0, {7, 1 << 20}, 16), std::vector<float>(32, 0.25f));
  EXPECT_TRUE(save.Ready());
  auto reply = proto::DecodeReply(save.Wait(), "save");
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_TRUE(std::filesystem::exists(dir + "/server-0.shard"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
