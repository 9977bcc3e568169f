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

TEST_F(FinishedJobServer, AnOutOfRangeFromElsewhereIsNotNothingLeftToDo) {
  EXPECT_FALSE(IsNothingLeftToDo(absl::OutOfRangeError("dense table 'w': range past its end")));
  EXPECT_TRUE(IsNothingLeftToDo(NothingLeftToDo("the job finished")));
  EXPECT_FALSE(IsNothingLeftToDo(absl::OkStatus()));
}

}  // namespace
}  // namespace pstrain::server
