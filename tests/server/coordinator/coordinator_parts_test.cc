// The coordinator's parts on their own, without a cluster: ElasticWorkers'
// shards, lead and returning workers, and ServerRecovery's timeout. (What
// needs the servers' answers is covered by elastic_test.cc and the
// integration tests.)
#include <functional>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "common/inproc_transport.h"
#include "server/coordinator/cluster_link.h"
#include "server/coordinator/elastic_workers.h"
#include "server/coordinator/rendezvous_store.h"
#include "server/coordinator/server_recovery.h"

namespace pstrain::server {
namespace {

// A core with no servers: parts never call the node.
class NoServers final : public ClusterLink {
 public:
  RpcNode& node() override { return node_; }
  int num_servers() const override { return 0; }
  PeerId server_peer(int) const override { return kNoPeer; }
  uint64_t epoch() const override { return 1; }
  bool finishing() const override { return false; }

 private:
  InProcNetwork net_;
  RpcNode node_{std::make_unique<InProcTransport>(&net_)};
};

std::string Value(RendezvousStore& store, const std::string& key) {
  std::string out = "<unset>";
  store.Get(key, absl::InfinitePast(), [&out](const Buffer* v) {
    if (v != nullptr) out = std::string(v->view());
  });
  return out;
}

proto::Heartbeat Position(int32_t epoch, int64_t rows, uint64_t samples) {
  proto::Heartbeat hb;
  hb.data_epoch = epoch;
  hb.data_rows = rows;
  hb.samples = samples;
  return hb;
}

const std::function<bool(int32_t)> kAllInJob = [](int32_t) { return true; };

TEST(ElasticWorkers, DroppedWorkersShardGoesOnceToTheFirstWorkerToClaimIt) {
  NoServers link;
  RendezvousStore store;
  ElasticWorkers elastic(true, 3, &link, &store);
  elastic.OnHeartbeat(1, Position(2, 40, 100));
  ASSERT_TRUE(elastic.Drop(1, "worker 1 stopped responding", kAllInJob).ok());
  EXPECT_TRUE(elastic.dropped(1));
  EXPECT_EQ(elastic.num_dropped(), 1);
  EXPECT_EQ(Value(store, "dead/1"), "100");

  proto::ShardClaim claim = elastic.Claim(2);
  EXPECT_EQ(claim.rank, 1);
  EXPECT_EQ(claim.epoch, 2);
  EXPECT_EQ(claim.rows, 40);
  EXPECT_EQ(claim.samples, 100u);
  EXPECT_EQ(Value(store, "adopted/1"), "2");
  EXPECT_EQ(elastic.Claim(0).rank, -1);  // nothing left
}

TEST(ElasticWorkers, ReturningWorkerResumesItsShardWhenNobodyAdoptedIt) {
  NoServers link;
  RendezvousStore store;
  ElasticWorkers elastic(true, 3, &link, &store);
  elastic.OnHeartbeat(2, Position(1, 7, 30));
  ASSERT_TRUE(elastic.Drop(2, "worker 2 stopped responding", kAllInJob).ok());
  proto::NodeInfo info;
  info.role = proto::Role::kWorker;
  info.endpoint = "worker2-again";
  elastic.Readmit(2, info);
  EXPECT_FALSE(elastic.dropped(2));
  EXPECT_EQ(elastic.num_dropped(), 0);
  EXPECT_EQ(Value(store, "dead/2"), "<unset>");
  ASSERT_TRUE(elastic.ResumesShard(2));
  proto::Rejoin j = elastic.TakeRejoin(2);
  EXPECT_EQ(j.state, proto::RejoinState::kResume);
  EXPECT_EQ(j.position.epoch, 1);
  EXPECT_EQ(j.position.rows, 7);
  EXPECT_EQ(j.samples, 30u);
  // Given once: asked again, it is a plain start.
  EXPECT_EQ(elastic.TakeRejoin(2).state, proto::RejoinState::kNew);
  // Heartbeats behind the resumed position (before its first step) are ignored.
  elastic.OnHeartbeat(2, Position(0, 0, 0));
  EXPECT_EQ(elastic.Claim(0).rank, -1);
  ASSERT_TRUE(elastic.Drop(2, "worker 2 stopped responding again", kAllInJob).ok());
  proto::ShardClaim claim = elastic.Claim(0);
  EXPECT_EQ(claim.rank, 2);
  EXPECT_EQ(claim.epoch, 1);
  EXPECT_EQ(claim.rows, 7);
}

TEST(ElasticWorkers, ReturningWorkerWhoseShardWasAdoptedStaysOutWithNothingToTrain) {
  NoServers link;
  RendezvousStore store;
  ElasticWorkers elastic(true, 3, &link, &store);
  ASSERT_TRUE(elastic.Drop(1, "worker 1 stopped responding", kAllInJob).ok());
  ASSERT_EQ(elastic.Claim(2).rank, 1);
  elastic.Readmit(1, proto::NodeInfo{});
  EXPECT_TRUE(elastic.dropped(1));
  EXPECT_FALSE(elastic.ResumesShard(1));
  proto::Rejoin j = elastic.TakeRejoin(1);
  EXPECT_EQ(j.state, proto::RejoinState::kAdopted);
  EXPECT_EQ(j.adopter, 2);
}

TEST(ElasticWorkers, LeadMovesToTheLowestWorkerStillInTheJobOnlyOnceWorkersAskToRejoin) {
  NoServers link;
  RendezvousStore store;
  ElasticWorkers elastic(true, 3, &link, &store);
  EXPECT_EQ(Value(store, "lead"), "0");
  absl::Status st = elastic.Drop(0, "worker 0 stopped responding", kAllInJob);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(st.message().find("cannot hand that role on"), std::string::npos) << st;
  EXPECT_FALSE(elastic.dropped(0));

  elastic.OnRejoinAsked();
  ASSERT_TRUE(elastic.Drop(0, "worker 0 stopped responding",
                           [](int32_t w) { return w != 1; })  // worker 1 finished
                  .ok());
  EXPECT_EQ(Value(store, "lead"), "2");
}

TEST(ElasticWorkers, NotElasticPublishesNoLead) {
  NoServers link;
  RendezvousStore store;
  ElasticWorkers elastic(false, 2, &link, &store);
  EXPECT_EQ(Value(store, "lead"), "<unset>");
}

TEST(ServerRecovery, EndsTheJobOnlyOnceTheTimeoutPassedWithoutTheServer) {
  NoServers link;
  ServerRecovery recovery(absl::Seconds(30), &link);
  EXPECT_FALSE(recovery.active());
  EXPECT_TRUE(recovery.CheckTimeout(absl::Now() + absl::Hours(1)).ok());
  recovery.Begin("server 1 at s1 stopped responding");
  EXPECT_TRUE(recovery.active());
  EXPECT_FALSE(recovery.restoring());
  EXPECT_TRUE(recovery.CheckTimeout(absl::Now()).ok());
  absl::Status st = recovery.CheckTimeout(absl::Now() + absl::Seconds(31));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "server 1 at s1 stopped responding; it did not come back within 30s");

  recovery.StartRestore();
  EXPECT_TRUE(recovery.restoring());
  recovery.Restored(proto::Recovered{});
  EXPECT_FALSE(recovery.active());
  EXPECT_FALSE(recovery.restoring());
  EXPECT_TRUE(recovery.CheckTimeout(absl::Now() + absl::Hours(1)).ok());
}

}  // namespace
}  // namespace pstrain::server
