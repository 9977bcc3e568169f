// --auth=curve with real processes: a keyed cluster trains to completion; a
// client without the cluster's key (no keys at all, or a key pair of its own
// that authorized_keys does not list) is refused, and its pushes never
// change a parameter; a node started without keys gets nothing while the
// cluster carries on; bad key settings are flag errors (exit 2).
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cluster/coordinator_client.h"
#include "common/rpc.h"
#include "common/security/curve_keys.h"
#include "common/zmq_transport.h"
#include "data/synthetic.h"
#include "proto_msgs/codec.h"
#include "tests/integration/test_process.h"
#include "worker/kv_client.h"

namespace pstrain::testing {
namespace {

// A job's coordinator and one server with --auth=curve, from fresh keys.
struct CurveCluster {
  std::string dir, keys_dir, coord;
  CurveKeys keys;
  std::unique_ptr<TestProcess> coordinator, server;

  CurveCluster() {
    dir = MakeTempDir("pstrain-sec");
    keys_dir = dir + "/keys";
    EXPECT_TRUE(WriteKeys({keys_dir, "", false}).ok());
    auto k = LoadCurveKeys(keys_dir);
    EXPECT_TRUE(k.ok()) << k.status();
    keys = k.value_or(CurveKeys{});
    std::vector<std::string> auth = {"--auth=curve", "--keys_dir=" + keys_dir};
    std::vector<std::string> cargs = {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + dir + "/coord",
                                      "--servers=1", "--workers=1"};
    cargs.insert(cargs.end(), auth.begin(), auth.end());
    coordinator = std::make_unique<TestProcess>("pstrain_coordinator", cargs, dir + "/coordinator.log");
    coord = WaitForFileLine(dir + "/coord", absl::Seconds(20));
    std::vector<std::string> sargs = {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0"};
    sargs.insert(sargs.end(), auth.begin(), auth.end());
    server = std::make_unique<TestProcess>("pstrain_server", sargs, dir + "/server.log");
  }
  ~CurveCluster() {
    server.reset();
    coordinator.reset();
    std::filesystem::remove_all(dir);
  }
};

// An RPC node of the test process with the given keys (empty: none),
// listening at `*endpoint` when that is given.
std::unique_ptr<RpcNode> StartNode(const CurveKeys& keys, std::string* endpoint) {
  ZmqTransportOptions o;
  o.name = "test";
  o.curve = keys;
  auto node = std::make_unique<RpcNode>(std::make_unique<ZmqTransport>(o));
  if (endpoint != nullptr) {
    auto ep = node->Bind("tcp://127.0.0.1:0");
    EXPECT_TRUE(ep.ok()) << ep.status();
    *endpoint = ep.value_or("");
  }
  RpcNode* raw = node.get();
  EXPECT_TRUE(node->Start([raw](RpcRequest&& req) {
                    raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
                  }).ok());
  return node;
}

Buffer Floats(std::vector<float> v) { return Buffer::FromVector(std::move(v)); }

// The dense table and three sparse rows, as the server holds them now.
std::vector<float> Snapshot(worker::KvClient& kv, const std::vector<uint64_t>& ids) {
  std::vector<float> rows(ids.size() * 4);
  auto r = kv.Pull({0}, {worker::SparsePull{1, ids, rows.data()}}, 0).Wait();
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<float> all;
  if (r.ok() && !r->empty()) {
    auto dense = (*r)[0].as<float>();
    all.assign(dense.begin(), dense.end());
  }
  all.insert(all.end(), rows.begin(), rows.end());
  return all;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Security, ClientWithoutTheClusterKeyIsRefusedAndItsPushesNeverChangeAParameter) {
  CurveCluster c;
  ASSERT_FALSE(c.coord.empty()) << c.coordinator->Log();
  // This process is the job's worker, with the cluster's keys.
  std::string endpoint;
  auto node = StartNode(c.keys, &endpoint);
  CoordinatorClientOptions co;
  co.coordinator = c.coord;
  co.endpoint = endpoint;
  co.connect_timeout = absl::Seconds(20);
  CoordinatorClient coordinator(node.get(), co);
  ASSERT_TRUE(coordinator.Register().ok()) << c.coordinator->Log();
  coordinator.StartHeartbeats(absl::Seconds(1), [] { return proto::Heartbeat{}; });
  auto view = coordinator.WaitForCluster(absl::Seconds(30));
  ASSERT_TRUE(view.ok()) << view.status() << c.server->Log();
  TableSpec dense, sparse;
  dense.id = 0;
  dense.name = "w";
  dense.size = 8;
  dense.optimizer.kind = OptimizerKind::kSgd;
  dense.optimizer.lr = 1.0f;
  dense.init = {InitKind::kUniform, 0.1f, 7};
  sparse = dense;
  sparse.id = 1;
  sparse.name = "emb";
  sparse.kind = TableKind::kSparse;
  sparse.size = 0;
  sparse.dim = 4;
  auto layout = coordinator.DefineTables({dense, sparse}, absl::Seconds(30));
  ASSERT_TRUE(layout.ok()) << layout.status();
  std::vector<std::string> servers;
  for (const auto& s : view->servers) servers.push_back(s.endpoint);
  worker::KvClientOptions ko;
  ko.request_timeout = absl::Seconds(20);
  worker::KvClient member(node.get(), *layout, servers, ko);
  const std::vector<uint64_t> ids = {1, 2, 3};
  std::vector<float> before = Snapshot(member, ids);
  ASSERT_EQ(before.size(), 8u + 12u);

  // Outsiders: no keys at all; a key pair of its own that is not listed.
  auto stranger_pair = GenerateCurveKeyPair();
  ASSERT_TRUE(stranger_pair.ok());
  CurveKeys stranger{stranger_pair->public_key, stranger_pair->secret_key, c.keys.public_key, {}};
  for (const CurveKeys& keys : {CurveKeys{}, stranger}) {
    auto outsider_node = StartNode(keys, nullptr);
    worker::KvClientOptions oo;
    oo.request_timeout = absl::Seconds(2);
    worker::KvClient outsider(outsider_node.get(), *layout, servers, oo);
    for (int i = 0; i < 3; ++i) {
      absl::Status st = outsider
                            .Push({{0, Floats(std::vector<float>(8, 1.0f))}},
                                  {{1, ids, Floats(std::vector<float>(12, 1.0f))}}, 1, i)
                            .Wait();
      EXPECT_TRUE(st.code() == absl::StatusCode::kUnavailable ||
                  st.code() == absl::StatusCode::kDeadlineExceeded)
          << st;
    }
    auto pulled = outsider.Pull({0}, {}, 0).Wait();
    EXPECT_FALSE(pulled.ok());
    outsider_node->Stop();
  }
  // Not one bit changed.
  std::vector<float> after = Snapshot(member, ids);
  EXPECT_TRUE(BitEqual(before, after)) << c.server->Log() << c.coordinator->Log();
  // The same push from a member does change them.
  ASSERT_TRUE(member
                  .Push({{0, Floats(std::vector<float>(8, 1.0f))}},
                        {{1, ids, Floats(std::vector<float>(12, 1.0f))}}, 1, 0)
                  .Wait()
                  .ok());
  std::vector<float> changed = Snapshot(member, ids);
  ASSERT_EQ(changed.size(), before.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_NE(changed[i], before[i]) << i;
  // The server said whom it refused.
  std::string log = c.server->Log();
  EXPECT_TRUE(absl::StrContains(log, "refused a connection from 127.0.0.1")) << log;
  EXPECT_TRUE(absl::StrContains(log, stranger.public_key)) << log;
  EXPECT_TRUE(c.server->running());
  coordinator.StopHeartbeats();
  node->Stop();
}

TEST(SecurityFault, ConnectWithoutKeysToACurveClusterGetsNothingAndTheClusterCarriesOn) {
  CurveCluster c;
  ASSERT_FALSE(c.coord.empty()) << c.coordinator->Log();
  // A worker without keys cannot even register (its data is good: a worker
  // checks that before it connects).
  const TrainEval data = WriteTrainEval(c.dir, 1, 20, 20);
  TestProcess keyless("pstrain_worker",
                      {"--coordinator=" + c.coord, "--bind=tcp://127.0.0.1:0",
                       "--train_data=" + data.train, "--connect_timeout=3"},
                      c.dir + "/keyless.log");
  EXPECT_NE(keyless.Wait(absl::Seconds(60)), 0) << keyless.Log();
  EXPECT_TRUE(absl::StrContains(keyless.Log(), "unreachable")) << keyless.Log();
  TestProcess probe("pstrain", {"health", "--endpoint=" + c.coord, "--timeout=2"},
                    c.dir + "/probe.log");
  EXPECT_EQ(probe.Wait(absl::Seconds(30)), 1) << probe.Log();
  // The cluster still answers its own members.
  EXPECT_TRUE(c.coordinator->running()) << c.coordinator->Log();
  EXPECT_TRUE(c.server->running()) << c.server->Log();
  TestProcess member("pstrain", {"health", "--endpoint=" + c.coord, "--timeout=10",
                                 "--auth=curve", "--keys_dir=" + c.keys_dir},
                     c.dir + "/member.log");
  EXPECT_EQ(member.Wait(absl::Seconds(30)), 0) << member.Log();
}

TEST(SecurityFault, BadKeySettingsAreFlagErrorsNamingTheProblem) {
  std::string dir = MakeTempDir("pstrain-sec");
  TestProcess no_dir("pstrain_server", {"--auth=curve"}, dir + "/a.log");
  EXPECT_EQ(no_dir.Wait(absl::Seconds(30)), 2);
  EXPECT_TRUE(absl::StrContains(no_dir.Log(), "--keys_dir")) << no_dir.Log();
  TestProcess missing("pstrain_coordinator", {"--auth=curve", "--keys_dir=" + dir + "/none"},
                      dir + "/b.log");
  EXPECT_EQ(missing.Wait(absl::Seconds(30)), 2);
  EXPECT_TRUE(absl::StrContains(missing.Log(), dir + "/none/cluster.key")) << missing.Log();
  // keygen makes the keys once; a second run refuses to overwrite them.
  TestProcess keygen("pstrain", {"keygen", "--out=" + dir + "/keys"}, dir + "/c.log");
  EXPECT_EQ(keygen.Wait(absl::Seconds(30)), 0) << keygen.Log();
  TestProcess again("pstrain", {"keygen", "--out=" + dir + "/keys"}, dir + "/d.log");
  EXPECT_EQ(again.Wait(absl::Seconds(30)), 2) << again.Log();
  EXPECT_TRUE(absl::StrContains(again.Log(), "--force")) << again.Log();
  ASSERT_EQ(chmod((dir + "/keys/cluster.key").c_str(), 0644), 0);
  TestProcess open_key("pstrain_worker", {"--auth=curve", "--keys_dir=" + dir + "/keys",
                                          "--train_data=/nonexistent.tsv"},
                       dir + "/e.log");
  EXPECT_EQ(open_key.Wait(absl::Seconds(30)), 2);
  EXPECT_TRUE(absl::StrContains(open_key.Log(), "chmod 600")) << open_key.Log();
  std::filesystem::remove_all(dir);
}

TEST(Security, CurveClusterTrainsToCompletion) {
  std::string dir = MakeTempDir("pstrain-sec");
  worker::SyntheticOptions o;
  o.seed = 3;
  o.rows = 20000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/train.tsv").ok());
  ASSERT_TRUE(WriteKeys({dir + "/keys", "", false}).ok());
  TestProcess launcher("pstrain",
                       {"local", "--servers=2", "--workers=2", "--model=lr", "--auth=curve",
                        "--keys_dir=" + dir + "/keys", "--train_data=" + dir + "/train.tsv",
                        "--timeout=240"},
                       dir + "/launcher.log");
  int code = launcher.Wait(absl::Minutes(5));
  std::string log = launcher.Log();
  ASSERT_EQ(code, 0) << log;
  EXPECT_TRUE(absl::StrContains(log, "all processes finished")) << log;
  EXPECT_TRUE(absl::StrContains(log, "RESULT model=lr")) << log;
  EXPECT_FALSE(absl::StrContains(log, "refused a connection")) << log;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
