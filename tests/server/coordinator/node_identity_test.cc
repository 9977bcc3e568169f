// Worker identities (--node_id) and ranks that survive restarts: a new
// identity takes a free rank, a known one gets its rank back, the map is
// journaled, and a coordinator restarted on the journal takes the known
// nodes back at their ranks (or starts over when a fresh process comes
// first). Without a journal, a node asking to resume is refused, naming why.
#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "cluster/coordinator_client.h"
#include "cluster/node_info.h"
#include "common/inproc_transport.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {
namespace {

class NodeIdentity : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/pstrain-identity-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (auto& n : nodes_) n->Stop();
    coordinator_.reset();
    std::filesystem::remove_all(dir_);
  }

  void StartCoordinator(bool journaled) {
    CoordinatorOptions o;
    o.bind = "coord";
    o.num_servers = 1;
    o.num_workers = 3;
    o.heartbeat_timeout = absl::Seconds(30);
    if (journaled) o.checkpoint.dir = dir_;
    auto c = Coordinator::Create(o, std::make_unique<InProcTransport>(&net_));
    ASSERT_TRUE(c.ok()) << c.status();
    coordinator_ = *std::move(c);
  }

  // Registers a node at endpoint `ep` (rank -1 unless `rank`), as the
  // client does, with `node_id` and `resume`.
  absl::StatusOr<proto::ClusterView> Register(proto::Role role, const std::string& ep,
                                              const std::string& node_id, int32_t rank = -1,
                                              bool resume = false) {
    auto node = std::make_unique<RpcNode>(std::make_unique<InProcTransport>(&net_));
    PS_RETURN_IF_ERROR(node->Bind(ep).status());
    PS_RETURN_IF_ERROR(node->Start([](RpcRequest&&) {}));
    proto::RegisterRequest req;
    req.node.role = role;
    req.node.rank = rank;
    req.node.endpoint = ep;
    req.node.incarnation = ProcessIncarnation();
    req.node.node_id = node_id;
    req.node.resume = resume;
    req.requested_rank = rank;
    proto::Header h;
    h.type = proto::MsgType::kRegister;
    h.sender_role = role;
    PeerId peer = node->Connect("coord");
    auto reply = node->Call(peer, proto::Encode(h, req), absl::Now() + absl::Seconds(5)).Wait();
    nodes_.push_back(std::move(node));
    PS_ASSIGN_OR_RETURN(proto::Decoded d, proto::DecodeReply(std::move(reply), "register"));
    return d.body<proto::ClusterView>();
  }

  int32_t RankOf(const std::string& ep, const std::string& node_id) {
    auto v = Register(proto::Role::kWorker, ep, node_id);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? v->your_rank : -2;
  }

  std::string dir_;
  InProcNetwork net_;
  std::unique_ptr<Coordinator> coordinator_;
  std::vector<std::unique_ptr<RpcNode>> nodes_;
};

TEST_F(NodeIdentity, NewIdentitiesTakeFreeRanksAndAKnownOneGetsItsRankBack) {
  StartCoordinator(/*journaled=*/false);
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  EXPECT_EQ(RankOf("w-b", "host-b"), 1);
  EXPECT_EQ(RankOf("w-a2", "host-a"), 0);  // host-a again
  EXPECT_EQ(RankOf("w-c", "host-c"), 2);
  auto full = Register(proto::Role::kWorker, "w-d", "host-d");
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
}

TEST_F(NodeIdentity, TheMapIsJournaled) {
  StartCoordinator(/*journaled=*/true);
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  EXPECT_EQ(RankOf("w-b", "host-b"), 1);
  auto j = CoordinatorJournal::Load(CoordinatorJournal::PathIn(dir_));
  ASSERT_TRUE(j.ok() && j->has_value()) << j.status();
  ASSERT_EQ((*j)->identities.size(), 2u);
  EXPECT_EQ((*j)->identities[0].node_id, "host-a");
  EXPECT_EQ((*j)->identities[0].rank, 0);
  EXPECT_EQ((*j)->identities[1].rank, 1);
  EXPECT_EQ((*j)->workers[1].info.endpoint, "w-b");
  EXPECT_EQ((*j)->state, JobState::kRunning);
}

TEST_F(NodeIdentity, RestartedCoordinatorTakesTheKnownNodesBackAtTheirRanks) {
  StartCoordinator(/*journaled=*/true);
  ASSERT_TRUE(Register(proto::Role::kServer, "s0", "", 0).ok());
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  EXPECT_EQ(RankOf("w-b", "host-b"), 1);
  EXPECT_EQ(RankOf("w-c", "host-c"), 2);
  // The coordinator dies (no orderly end) and a new one starts on its journal.
  coordinator_.reset();
  for (auto& n : nodes_) n->Stop();
  nodes_.clear();
  StartCoordinator(/*journaled=*/true);
  auto s = Register(proto::Role::kServer, "s0", "", 0, /*resume=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->your_rank, 0);
  EXPECT_TRUE(s->journaled);
  for (int r : {0, 1, 2}) {
    auto w = Register(proto::Role::kWorker, "w" + std::to_string(r), "", r, /*resume=*/true);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(w->your_rank, r);
  }
  // Every known node is back: the full view, at the journaled ranks.
  auto all = Register(proto::Role::kWorker, "w-a3", "host-a");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->your_rank, 0);
  ASSERT_EQ(all->workers.size(), 3u);
}

TEST_F(NodeIdentity, FreshProcessFirstMakesARestartedCoordinatorStartOver) {
  StartCoordinator(/*journaled=*/true);
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  EXPECT_EQ(RankOf("w-b", "host-b"), 1);
  coordinator_.reset();
  for (auto& n : nodes_) n->Stop();
  nodes_.clear();
  StartCoordinator(/*journaled=*/true);
  // A new process (no resume) before any known node: a new job.
  EXPECT_EQ(RankOf("w-b2", "host-b"), 0);
  auto j = CoordinatorJournal::Load(CoordinatorJournal::PathIn(dir_));
  ASSERT_TRUE(j.ok() && j->has_value()) << j.status();
  ASSERT_EQ((*j)->identities.size(), 1u);
  EXPECT_EQ((*j)->identities[0].node_id, "host-b");
}

TEST_F(NodeIdentity, NodeThatHadNotJoinedYetJoinsARestartedCoordinatorTakingTheJobBack) {
  StartCoordinator(/*journaled=*/true);
  ASSERT_TRUE(Register(proto::Role::kServer, "s0", "", 0).ok());
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  // The coordinator dies while the job assembles; a new one takes it back.
  coordinator_.reset();
  for (auto& n : nodes_) n->Stop();
  nodes_.clear();
  StartCoordinator(/*journaled=*/true);
  // A worker that had not joined comes first: it joins (rank 1), no start over.
  EXPECT_EQ(RankOf("w-b", ""), 1);
  auto s = Register(proto::Role::kServer, "s0", "", 0, /*resume=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  auto w = Register(proto::Role::kWorker, "w-a", "host-a", 0, /*resume=*/true);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(RankOf("w-c", "host-c"), 2);
  auto j = CoordinatorJournal::Load(CoordinatorJournal::PathIn(dir_));
  ASSERT_TRUE(j.ok() && j->has_value()) << j.status();
  EXPECT_EQ((*j)->workers[0].info.node_id, "host-a");
  EXPECT_EQ((*j)->workers[1].info.endpoint, "w-b");
}

TEST_F(NodeIdentity, ResumeToACoordinatorWithoutJournalIsRefusedNamingWhy) {
  StartCoordinator(/*journaled=*/false);
  auto w = Register(proto::Role::kWorker, "w-a", "host-a", 1, /*resume=*/true);
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition) << w.status();
  EXPECT_NE(w.status().message().find("keeps no journal (no --checkpoint_dir)"), std::string::npos)
      << w.status();
}

TEST_F(NodeIdentity, StartOnAFinishedJobsFolderIsToldItFinishedUnlessNewJob) {
  CoordinatorOptions o;
  o.checkpoint.dir = dir_;
  const std::string path = CoordinatorJournal::PathIn(dir_);
  {
    JobJournal running;
    running.num_servers = 1;
    running.num_workers = 3;
    auto j = CoordinatorJournal::Create(path, running);
    ASSERT_TRUE(j.ok()) << j.status();
    auto none = FinishedJob(o);
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->has_value()) << "a running job is taken back, not refused";
    ASSERT_TRUE((*j)->End(JobState::kFinished, 782, "").ok());
  }
  auto finished = FinishedJob(o);
  ASSERT_TRUE(finished.ok()) << finished.status();
  ASSERT_TRUE(finished->has_value());
  EXPECT_EQ((*finished)->final_step, 782);
  o.new_job = true;
  auto fresh = FinishedJob(o);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->has_value());
  // --new_job: the coordinator starts a new job over the finished one's journal.
  o.new_job = true;
  o.bind = "coord";
  o.num_servers = 1;
  o.num_workers = 3;
  auto c = Coordinator::Create(o, std::make_unique<InProcTransport>(&net_));
  ASSERT_TRUE(c.ok()) << c.status();
  coordinator_ = *std::move(c);
  EXPECT_EQ(RankOf("w-a", "host-a"), 0);
  auto j = CoordinatorJournal::Load(path);
  ASSERT_TRUE(j.ok() && j->has_value()) << j.status();
  EXPECT_EQ((*j)->state, JobState::kRunning);
}

}  // namespace
}  // namespace pstrain::server
