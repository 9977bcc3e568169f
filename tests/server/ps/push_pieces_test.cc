// Dense pushes sent in pieces (KvClientOptions::push_partition_bytes,
// KvRequest::partial) leave the tables exactly as one message per server
// would, under every consistency model and with executor threads.
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "common/optim/optimizer.h"
#include "proto_msgs/codec.h"
#include "server/ps/tables/dense_shard.h"
#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

using proto::Consistency;

std::vector<TableSpec> Tables() {
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  OptimizerConfig momentum = Sgd(0.1f);
  momentum.momentum = 0.9f;
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.05f;
  return {DenseSpec(0, "adam", 1000, adam), DenseSpec(1, "momentum", 300, momentum),
          SparseSpec(2, "emb", 4, adagrad)};
}

// Every worker pushes `steps` steps of random gradients (the same ones in
// every run), pulling after each, and then the tables are pulled: dense
// values and rows of ids 0..19 of the sparse table.
std::vector<float> Train(TestCluster& cluster, int workers, int steps) {
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&cluster, w, steps] {
      std::mt19937 rng(17 + w);
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (int step = 0; step < steps; ++step) {
        std::vector<worker::DensePush> dense;
        for (uint32_t t : {0u, 1u}) {
          const size_t n = t == 0 ? 1000 : 300;
          uint8_t* raw = nullptr;
          Buffer b = Buffer::Allocate(n * sizeof(float), &raw);
          for (size_t i = 0; i < n; ++i) reinterpret_cast<float*>(raw)[i] = g(rng);
          dense.push_back(worker::DensePush{t, b});
        }
        std::vector<uint64_t> ids = {static_cast<uint64_t>(step), 7, 11};
        std::vector<float> rows(ids.size() * 4);
        for (float& v : rows) v = g(rng);
        worker::SparsePush sp{2, ids, Buffer::FromVector(std::move(rows))};
        absl::Status pushed = cluster.kv(w).Push(dense, {sp}, 8, step).Wait();
        ASSERT_TRUE(pushed.ok()) << pushed;
        // The next step's pull, as a trainer's (under BSP it waits for the step).
        ASSERT_TRUE(cluster.kv(w).Pull({0}, {}, step + 1).Wait().ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<uint64_t> ids(20);
  for (uint64_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::vector<float> rows(ids.size() * 4);
  auto dense = cluster.kv(0).Pull({0, 1}, {worker::SparsePull{2, ids, rows.data()}}, steps).Wait();
  EXPECT_TRUE(dense.ok()) << dense.status();
  std::vector<float> all;
  if (!dense.ok()) return all;
  for (const Buffer& b : *dense) all.insert(all.end(), b.as<float>().begin(), b.as<float>().end());
  all.insert(all.end(), rows.begin(), rows.end());
  return all;
}

// (consistency, server threads)
class PushPieces : public ::testing::TestWithParam<std::tuple<Consistency, int>> {};

TEST_P(PushPieces, LeaveTheTablesAsOneMessagePerServerWould) {
  const auto [consistency, threads] = GetParam();
  // ASP applies pushes in arrival order: one worker keeps that order fixed.
  const int workers = consistency == Consistency::kBsp ? 2 : 1;
  auto run = [&](uint64_t partition_bytes, uint64_t* calls) {
    // Chunk 256: the 1000-float table is cut between the 2 servers.
    TestCluster cluster(2, workers, consistency, /*staleness=*/2, /*chunk=*/256, threads);
    cluster.DefineTables(Tables(), partition_bytes);
    std::vector<float> values = Train(cluster, workers, 6);
    *calls = cluster.worker(0).node->stats().calls;
    return values;
  };
  uint64_t whole_calls = 0, piece_calls = 0;
  const std::vector<float> whole = run(0, &whole_calls);
  // 40-float pieces: 500 floats per server of table 0 and 150 of table 1.
  const std::vector<float> pieces = run(40 * sizeof(float), &piece_calls);
  ASSERT_EQ(whole.size(), 1000u + 300u + 80u);
  EXPECT_EQ(pieces, whole);  // bit for bit
  // The pieces did travel as messages of their own.
  EXPECT_GE(piece_calls, whole_calls + 6 * 2 * 10) << whole_calls;
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, PushPieces,
    ::testing::Combine(::testing::Values(Consistency::kAsp, Consistency::kBsp, Consistency::kSsp),
                       ::testing::Values(1, 3)));

// A message marked partial that carries a sparse part, or retires, is
// refused; a partial piece with a NaN is refused and changes nothing.
TEST(PushPieces, MalformedOrNonFinitePiecesAreRefused) {
  TestCluster cluster(1, 1);
  cluster.DefineTables(Tables());
  RpcNode& node = *cluster.worker(0).node;
  const PeerId server = node.Connect("server0");
  auto send = [&](proto::KvRequest body, std::vector<Buffer> payloads, std::vector<proto::DType> types) {
    proto::Header h;
    h.type = proto::MsgType::kPush;
    h.sender_role = proto::Role::kWorker;
    h.sender_rank = 0;
    h.step = 0;
    h.epoch = cluster.kv(0).layout().epoch;
    return proto::DecodeReply(
               node.Call(server, proto::Encode(h, body, std::move(payloads), types),
                         absl::Now() + absl::Seconds(10))
                   .Wait(),
               "push")
        .status();
  };
  auto before = cluster.kv(0).Pull({0}, {}, 0).Wait();
  ASSERT_TRUE(before.ok());
  const std::vector<float> old(before->at(0).as<float>().begin(), before->at(0).as<float>().end());

  proto::KvRequest sparse;
  sparse.parts = {proto::KvPart{2, 0, 1}};
  sparse.num_samples = 1;
  sparse.partial = true;
  absl::Status st = send(sparse, {Buffer::FromVector(std::vector<uint64_t>{5}),
                                  Buffer::FromVector(std::vector<float>(4, 1.0f))},
                         {proto::DType::kU64, proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("partial push carries dense parts only"), absl::string_view::npos) << st;

  proto::KvRequest nan;
  nan.parts = {proto::KvPart{0, 100, 50}};
  nan.num_samples = 1;
  nan.partial = true;
  std::vector<float> grads(50, 1.0f);
  grads[20] = NAN;
  st = send(nan, {Buffer::FromVector(std::move(grads))}, {proto::DType::kF32});
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("non-finite"), absl::string_view::npos) << st;

  auto after = cluster.kv(0).Pull({0}, {}, 0).Wait();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::vector<float>(after->at(0).as<float>().begin(), after->at(0).as<float>().end()), old);
}

// Adam counts one step for a push whose pieces come in order, and the
// pieces give the very numbers one push gives.
TEST(PushPieces, AdamCountsAPushInPiecesAsOneStep) {
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  const TableSpec spec = DenseSpec(0, "adam", 64, adam);
  auto whole = server::DenseShard::Create(spec, 0, 64);
  auto pieces = server::DenseShard::Create(spec, 0, 64);
  ASSERT_TRUE(whole.ok() && pieces.ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> grads(64);
    for (float& v : grads) v = g(rng);
    ASSERT_TRUE((*whole)->Push(0, grads, 0.5f).ok());
    for (size_t at : {0, 24, 48}) {
      const size_t n = at == 48 ? 16 : 24;
      ASSERT_TRUE((*pieces)->Push(at, std::span<const float>(grads).subspan(at, n), 0.5f).ok());
    }
    EXPECT_EQ((*pieces)->step(), static_cast<uint64_t>(step));
    EXPECT_EQ((*whole)->step(), static_cast<uint64_t>(step));
  }
  const std::vector<float> a((*whole)->weights().begin(), (*whole)->weights().end());
  const std::vector<float> b((*pieces)->weights().begin(), (*pieces)->weights().end());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace pstrain::testing
