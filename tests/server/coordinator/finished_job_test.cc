// A coordinator started on a finished job's journal (ServeFinishedJob) tells
// each node that registers that there is nothing left to do, through the
// client's Register(), and returns once all of the job's nodes were told;
// an OutOfRange from elsewhere is not taken for that answer.
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "cluster/coordinator_client.h"
#include "common/inproc_transport.h"
#include "server/coordinator/coordinator.h"

namespace pstrain::server {
namespace {

// A server's client that reconnects to a lost coordinator.
CoordinatorClientOptions ReconnectingServer(const std::string& ep) {
  CoordinatorClientOptions o;
  o.coordinator = "coord";
  o.role = proto::Role::kServer;
  o.endpoint = ep;
  o.reconnect_timeout = absl::Seconds(20);
  o.lost_after = absl::Milliseconds(300);
  return o;
}

class FinishedJobServer : public ::testing::Test {
 protected:
  absl::StatusOr<proto::ClusterView> Register(proto::Role role, const std::string& ep) {
    auto node = std::make_unique<RpcNode>(std::make_unique<InProcTransport>(&net_));
    PS_RETURN_IF_ERROR(node->Bind(ep).status());
    PS_RETURN_IF_ERROR(node->Start([](RpcRequest&&) {}));
    CoordinatorClientOptions o;
    o.coordinator = "coord";
    o.role = role;
    o.endpoint = ep;
    o.connect_timeout = absl::Seconds(10);
    CoordinatorClient client(node.get(), o);
    auto view = client.Register();
    node->Stop();
    return view;
  }

  InProcNetwork net_;
};

TEST_F(FinishedJobServer, TellsEveryNodeThenReturns) {
  CoordinatorOptions o;
  o.bind = "coord";
  o.checkpoint.dir = "/ckpt";
  o.num_servers = 1;
  o.num_workers = 2;
  JobJournal job;
  job.state = JobState::kFinished;
  job.final_step = 978;
  job.ended = "2026-12-02T00:28:58Z";
  std::string listening;
  absl::Status served = absl::UnknownError("not returned");
  std::thread serve([&] {
    served = ServeFinishedJob(o, job, std::make_unique<InProcTransport>(&net_),
                              absl::Seconds(20), [&](const std::string& ep) {
                                listening = ep;
                                return absl::OkStatus();
                              });
  });
  const absl::Time start = absl::Now();
  for (auto [role, ep] : {std::pair{proto::Role::kServer, "s0"},
                          std::pair{proto::Role::kWorker, "w0"},
                          std::pair{proto::Role::kWorker, "w1"}}) {
    auto view = Register(role, ep);
    ASSERT_FALSE(view.ok());
    EXPECT_TRUE(IsNothingLeftToDo(view.status())) << view.status();
    EXPECT_NE(view.status().message().find("finished at step 978"), absl::string_view::npos)
        << view.status();
  }
  serve.join();
  EXPECT_TRUE(served.ok()) << served;
  EXPECT_FALSE(listening.empty());
  // Returned once the three were told, not after the 20 s bound.
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

// The coordinator died after journaling the job's end but before stopping
// a server; restarted, it is a finished-job coordinator: the server, which
// registers again with its rank, is told the job finished and gives up
// cleanly instead of with an error.
TEST_F(FinishedJobServer, ANodeThatLostItsCoordinatorIsToldTheJobFinished) {
  CoordinatorOptions o;
  o.bind = "coord";
  o.num_servers = 1;
  o.num_workers = 1;
  o.heartbeat_timeout = absl::Seconds(30);
  auto c = Coordinator::Create(o, std::make_unique<InProcTransport>(&net_));
  ASSERT_TRUE(c.ok()) << c.status();
  auto node = std::make_unique<RpcNode>(std::make_unique<InProcTransport>(&net_));
  ASSERT_TRUE(node->Bind("s0").ok());
  ASSERT_TRUE(node->Start([](RpcRequest&&) {}).ok());
  CoordinatorClient client(node.get(), ReconnectingServer("s0"));
  ASSERT_TRUE(client.Register().ok());
  client.StartHeartbeats(absl::Milliseconds(50), nullptr);
  c->reset();  // the coordinator dies
  JobJournal job;
  job.state = JobState::kFinished;
  job.final_step = 40;
  absl::Status served = absl::UnknownError("not returned");
  std::thread serve([&] {
    served = ServeFinishedJob(o, job, std::make_unique<InProcTransport>(&net_),
                              absl::Seconds(5), [](const std::string&) { return absl::OkStatus(); });
  });
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!client.gave_up() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_TRUE(client.gave_up());
  const absl::Status why = client.CoordinatorStatus();
  EXPECT_TRUE(IsNothingLeftToDo(why)) << why;
  EXPECT_NE(why.message().find("finished at step 40"), absl::string_view::npos) << why;
  client.StopHeartbeats();
  serve.join();
  EXPECT_TRUE(served.ok()) << served;
  node->Stop();
}

TEST_F(FinishedJobServer, AnOutOfRangeFromElsewhereIsNotNothingLeftToDo) {
  EXPECT_FALSE(IsNothingLeftToDo(absl::OutOfRangeError("dense table 'w': range past its end")));
  EXPECT_TRUE(IsNothingLeftToDo(NothingLeftToDo("the job finished")));
  EXPECT_FALSE(IsNothingLeftToDo(absl::OkStatus()));
}

}  // namespace
}  // namespace pstrain::server
