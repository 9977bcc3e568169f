// A worker's push and its next pull in one message per server
// (KvClient::PushPull, proto::kPushPull) leave the tables and answer the
// pull exactly as the two sent one after the other do, under every
// consistency model, with executor threads and with a dense push in
// pieces; a malformed bundle is refused without touching the tables.
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "common/optim/optimizer.h"
#include "proto_msgs/codec.h"
#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

using proto::Consistency;

std::vector<TableSpec> Tables() {
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.05f;
  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  adam.lr = 0.01f;
  return {DenseSpec(0, "dense", 1000, adam), SparseSpec(1, "emb", 4, adagrad)};
}

// What every pull of a run returned (dense values, then sparse rows), and
// the tables at the end.
struct RunResult {
  std::vector<float> pulled;
  std::vector<float> final_tables;
  uint64_t calls = 0;  // worker 0's messages
};

// Each worker pushes `steps` steps of random gradients (the same in every
// run) and pulls the next step's rows after each push: as two messages, or
// (`bundled`) as one message per server.
RunResult Train(TestCluster& cluster, int workers, int steps, bool bundled) {
  std::vector<std::vector<float>> pulled(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&cluster, &pulled, w, steps, bundled] {
      std::mt19937 rng(29 + w);
      std::normal_distribution<float> g(0.0f, 1.0f);
      for (int step = 0; step < steps; ++step) {
        uint8_t* raw = nullptr;
        Buffer b = Buffer::Allocate(1000 * sizeof(float), &raw);
        for (size_t i = 0; i < 1000; ++i) reinterpret_cast<float*>(raw)[i] = g(rng);
        std::vector<worker::DensePush> dense = {worker::DensePush{0, b}};
        // Ids on both servers; the next step's pull reads some of them.
        std::vector<uint64_t> ids = {static_cast<uint64_t>(step), 7, 11, static_cast<uint64_t>(1000 + step)};
        std::vector<float> rows(ids.size() * 4);
        for (float& v : rows) v = g(rng);
        std::vector<worker::SparsePush> sparse = {
            worker::SparsePush{1, ids, Buffer::FromVector(std::move(rows))}};
        std::vector<uint64_t> next = {7, 11, static_cast<uint64_t>(step + 1), 5000};
        std::vector<float> got(next.size() * 4);
        std::vector<worker::SparsePull> pull = {worker::SparsePull{1, next, got.data()}};
        absl::StatusOr<std::vector<Buffer>> values;
        if (bundled) {
          auto [push_handle, pull_handle] =
              cluster.kv(w).PushPull(dense, sparse, 8, step, {0}, pull, step + 1);
          values = pull_handle.Wait();
          absl::Status pushed = push_handle.Wait();
          ASSERT_TRUE(pushed.ok()) << pushed;
        } else {
          absl::Status pushed = cluster.kv(w).Push(dense, sparse, 8, step).Wait();
          ASSERT_TRUE(pushed.ok()) << pushed;
          values = cluster.kv(w).Pull({0}, pull, step + 1).Wait();
        }
        ASSERT_TRUE(values.ok()) << values.status();
        auto d = values->at(0).as<float>();
        pulled[w].insert(pulled[w].end(), d.begin(), d.end());
        pulled[w].insert(pulled[w].end(), got.begin(), got.end());
      }
    });
  }
  for (auto& t : threads) t.join();
  RunResult run;
  for (const auto& p : pulled) run.pulled.insert(run.pulled.end(), p.begin(), p.end());
  std::vector<uint64_t> ids = {0, 1, 2, 3, 5, 7, 11, 1000, 1001, 1002, 1003, 5000};
  std::vector<float> rows(ids.size() * 4);
  auto dense = cluster.kv(0).Pull({0}, {worker::SparsePull{1, ids, rows.data()}}, steps).Wait();
  EXPECT_TRUE(dense.ok()) << dense.status();
  if (!dense.ok()) return run;
  auto d = dense->at(0).as<float>();
  run.final_tables.assign(d.begin(), d.end());
  run.final_tables.insert(run.final_tables.end(), rows.begin(), rows.end());
  run.calls = cluster.worker(0).node->stats().calls;
  return run;
}

// (consistency, server threads, push pieces of at most this many bytes)
class PushPull : public ::testing::TestWithParam<std::tuple<Consistency, int, uint64_t>> {};

TEST_P(PushPull, AnswersAndLeavesTheTablesAsAPushThenAPull) {
  const auto [consistency, threads, piece_bytes] = GetParam();
  // ASP and SSP apply pushes in arrival order: one worker keeps that order
  // fixed.
  const int workers = consistency == Consistency::kBsp ? 2 : 1;
  constexpr int kSteps = 6;
  auto run = [&](bool bundled) {
    // Chunk 256: the dense table is cut between the 2 servers.
    TestCluster cluster(2, workers, consistency, /*staleness=*/1, /*chunk=*/256, threads);
    cluster.DefineTables(Tables(), piece_bytes);
    return Train(cluster, workers, kSteps, bundled);
  };
  const RunResult apart = run(false);
  const RunResult bundled = run(true);
  ASSERT_EQ(apart.pulled.size(), static_cast<size_t>(workers) * kSteps * (1000 + 16));
  EXPECT_EQ(bundled.pulled, apart.pulled);  // bit for bit
  EXPECT_EQ(bundled.final_tables, apart.final_tables);
  // Each step took one message fewer per server.
  EXPECT_EQ(bundled.calls + kSteps * 2, apart.calls);
}

INSTANTIATE_TEST_SUITE_P(
    AllModes, PushPull,
    ::testing::Combine(::testing::Values(Consistency::kAsp, Consistency::kBsp, Consistency::kSsp),
                       ::testing::Values(1, 3), ::testing::Values(uint64_t{0}, uint64_t{400})));

// A bundle that is not a push and a pull from its own sender, or whose
// frames do not make whole messages, is refused with what is wrong; the
// tables are unchanged.
TEST(PushPull, MalformedBundlesAreRefused) {
  TestCluster cluster(1, 1);
  cluster.DefineTables(Tables());
  RpcNode& node = *cluster.worker(0).node;
  const PeerId server = node.Connect("server0");
  const uint64_t epoch = cluster.kv(0).layout().epoch;
  auto header = [&](proto::MsgType type, int32_t rank) {
    proto::Header h;
    h.type = type;
    h.sender_role = proto::Role::kWorker;
    h.sender_rank = rank;
    h.step = 0;
    h.epoch = epoch;
    return h;
  };
  auto push = [&](int32_t rank) {
    proto::KvRequest body;
    body.parts = {proto::KvPart{0, 0, 1000}};
    body.num_samples = 1;
    return proto::Encode(header(proto::MsgType::kPush, rank), body,
                         {Buffer::FromVector(std::vector<float>(1000, 1.0f))}, {proto::DType::kF32});
  };
  auto pull = [&](int32_t rank) {
    proto::KvRequest body;
    body.parts = {proto::KvPart{0, 0, 1000}};
    return proto::Encode(header(proto::MsgType::kPull, rank), body);
  };
  auto send = [&](Message m) {
    return proto::DecodeReply(node.Call(server, std::move(m), absl::Now() + absl::Seconds(10)).Wait(),
                              "push-pull")
        .status();
  };
  auto bundle = [&](std::vector<Message> inner) {
    return proto::EncodeBundle(header(proto::MsgType::kPushPull, 0), std::move(inner));
  };
  auto before = cluster.kv(0).Pull({0}, {}, 0).Wait();
  ASSERT_TRUE(before.ok());
  const std::vector<float> old(before->at(0).as<float>().begin(), before->at(0).as<float>().end());

  auto expect_refused = [&](Message m, absl::string_view why) {
    absl::Status st = send(std::move(m));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find(why), absl::string_view::npos) << st;
  };
  {
    std::vector<Message> v;
    v.push_back(pull(0));
    v.push_back(push(0));
    expect_refused(bundle(std::move(v)), "carries Pull and Push, expected Push and Pull");
  }
  {
    std::vector<Message> v;
    v.push_back(push(0));
    expect_refused(bundle(std::move(v)), "a bundle of 1 messages");
  }
  {
    std::vector<Message> v;
    v.push_back(push(0));
    v.push_back(pull(0));
    v.push_back(pull(0));
    expect_refused(bundle(std::move(v)), "more than 2 messages in one bundle");
  }
  {
    std::vector<Message> v;
    v.push_back(push(0));
    v.push_back(pull(0));
    Message m = bundle(std::move(v));
    // Cut after the push's header: its gradient frame is missing.
    std::vector<Buffer> frames = {m.payloads[0]};
    expect_refused(proto::EncodeHeaderOnly(header(proto::MsgType::kPushPull, 0), frames,
                                           {proto::DType::kU8}),
                   "names 1 payloads, the bundle has 0 frames left");
  }
  {
    std::vector<Message> v;
    v.push_back(push(0));
    v.push_back(pull(0));
    Message m = bundle(std::move(v));
    Buffer garbage = Buffer::FromString("not a header");
    std::vector<Buffer> frames = {garbage, m.payloads[1], m.payloads[2]};
    expect_refused(proto::EncodeHeaderOnly(header(proto::MsgType::kPushPull, 0), frames,
                                           std::vector<proto::DType>(3, proto::DType::kU8)),
                   "the header of message 0 in the bundle is malformed");
  }
  {
    // An inner message from another sender than the bundle's.
    proto::Header oh = header(proto::MsgType::kPull, 0);
    oh.sender_role = proto::Role::kTool;
    proto::KvRequest body;
    body.parts = {proto::KvPart{0, 0, 1000}};
    std::vector<Message> v;
    v.push_back(push(0));
    v.push_back(proto::Encode(oh, body));
    expect_refused(bundle(std::move(v)), "an inner message from another sender than the bundle");
  }
  auto after = cluster.kv(0).Pull({0}, {}, 0).Wait();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(std::vector<float>(after->at(0).as<float>().begin(), after->at(0).as<float>().end()), old);

  // A good bundle: the push is applied before the pull reads the table.
  std::vector<Message> v;
  v.push_back(push(0));
  v.push_back(pull(0));
  absl::StatusOr<Message> reply =
      node.Call(server, bundle(std::move(v)), absl::Now() + absl::Seconds(10)).Wait();
  auto d = proto::DecodeReply(std::move(reply), "push-pull");
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->num_payloads(), 1u);
  auto pulled = d->payload_as<float>(0);
  ASSERT_EQ(pulled.size(), 1000u);
  for (size_t i = 0; i < 1000; ++i) ASSERT_LT(pulled[i], old[i]) << i;  // moved against +1
}

}  // namespace
}  // namespace pstrain::testing
