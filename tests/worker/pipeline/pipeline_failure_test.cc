// What a stage does when a neighbour misbehaves: a message with the wrong
// shape or tag is refused with an error naming both stages; a neighbour that
// dies, or fails and says so, stops the others within the deadline with an
// error naming it.
#include <memory>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "tests/model/models/model_test_util.h"
#include "tests/worker/pipeline/stage_harness.h"

namespace pstrain::worker {
namespace {

using testing::LocalParams;
using testing::RandomBatch;
using testing::StageHarness;

ModelOptions Options() {
  ModelOptions o = testing::TinyOptions("deep_tower");
  o.deep_mlp = {7, 6, 5};
  return o;
}

struct Fixture {
  Fixture() {
    auto m = CreateModel(Options());
    EXPECT_TRUE(m.ok());
    model = *std::move(m);
    std::mt19937 rng(3);
    batch = std::make_shared<const Batch>(RandomBatch(16, 3, 3, 2, 5, rng));
    model->Plan(*batch, &plan);
    store = std::make_unique<LocalParams>(*model, 0.5f);
    store->Bind(plan, &params, &grads);
    for (const TableSpec& t : model->tables()) shapes.push_back(store->grad(t.id));
  }
  std::unique_ptr<Model> model;
  std::shared_ptr<const Batch> batch;
  BatchPlan plan;
  std::unique_ptr<LocalParams> store;
  ParamRefs params;
  GradRefs grads;
  std::vector<std::vector<float>> shapes;
};

// Sends one pipeline message from a bare node (a misbehaving stage 0).
absl::Status SendRaw(RpcNode* from, const std::string& to, proto::MsgType type,
                     const proto::PipeTransfer& t, std::vector<Buffer> payloads) {
  proto::Header h;
  h.type = type;
  h.sender_role = proto::Role::kWorker;
  h.sender_rank = 0;
  std::vector<proto::DType> types(payloads.size(), proto::DType::kF32);
  PeerId peer = from->Connect(to);
  auto reply = from->Call(peer, proto::Encode(h, t, std::move(payloads), types),
                          absl::Now() + absl::Seconds(5))
                   .Wait();
  return proto::DecodeReply(reply, "pipe").status();
}

Buffer Floats(size_t n) { return Buffer::FromVector(std::vector<float>(n, 0.5f)); }

// Stage 1 of a 2-stage deep_tower pipeline runs alone; the test plays
// stage 0 from a node bound at stage 0's endpoint.
class LoneStage1 {
 public:
  LoneStage1() : harness_(Options(), *f_.model, 2, 4, PipeSchedule::k1F1B, 16) {
    harness_.node(0).SetComm(nullptr);
    thread_ = std::thread([this] {
      StageStepInputs in;
      in.step = 0;
      in.params = &f_.params;
      GradRefs g;
      for (auto& s : grads_ = f_.shapes) g.tables.push_back(s.data());
      in.grads = &g;
      status_ = harness_.runner(1).TrainStep(in).status();
    });
  }
  ~LoneStage1() {
    if (thread_.joinable()) thread_.join();
  }
  absl::Status Join() {
    thread_.join();
    return status_;
  }
  int width() const { return harness_.spec().tower[harness_.partition().begin(1)].in; }
  RpcNode* stage0() { return harness_.node(0).node(); }

 private:
  Fixture f_;
  StageHarness harness_;
  std::vector<std::vector<float>> grads_;
  std::thread thread_;
  absl::Status status_;
};

proto::PipeTransfer Activation(int width, int rows, int mb = 0) {
  proto::PipeTransfer t;
  t.from_stage = 0;
  t.phase = proto::PipePhase::kTrain;
  t.step = 0;
  t.microbatch = mb;
  t.num_microbatches = 4;
  t.step_rows = 16;
  t.rows = rows;
  t.cols = width;
  return t;
}

TEST(PipelineFailure, ActivationOfTheWrongWidthIsRefusedByBothStages) {
  LoneStage1 s;
  proto::PipeTransfer t = Activation(s.width() + 1, 4);
  absl::Status sent =
      SendRaw(s.stage0(), testing::StageEndpoint(1), proto::MsgType::kPipeActivation, t,
              {Floats(4 * (s.width() + 1)), Floats(4)});
  EXPECT_EQ(sent.code(), absl::StatusCode::kInvalidArgument);
  absl::Status st = s.Join();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("stage 1 of replica 0 refused an activation from stage 0"),
            absl::string_view::npos)
      << st;
  EXPECT_NE(st.message().find("width"), absl::string_view::npos) << st;
}

TEST(PipelineFailure, ActivationOfAnotherReplicaIsRefused) {
  LoneStage1 s;
  proto::PipeTransfer t = Activation(s.width(), 4);
  t.replica = 3;
  EXPECT_EQ(SendRaw(s.stage0(), testing::StageEndpoint(1), proto::MsgType::kPipeActivation, t,
                    {Floats(4 * s.width()), Floats(4)})
                .code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status st = s.Join();
  EXPECT_NE(st.message().find("this is replica 0"), absl::string_view::npos) << st;
}

TEST(PipelineFailure, MicrobatchOutOfOrderIsAWrongTag) {
  LoneStage1 s;
  // Well-formed, but the schedule expects micro-batch 0 first.
  proto::PipeTransfer t = Activation(s.width(), 4, /*mb=*/0);
  EXPECT_TRUE(SendRaw(s.stage0(), testing::StageEndpoint(1), proto::MsgType::kPipeActivation, t,
                      {Floats(4 * s.width()), Floats(4)})
                  .ok());
  // Message 1 claims to be micro-batch 2.
  t = Activation(s.width(), 4, /*mb=*/2);
  t.seq = 1;
  (void)SendRaw(s.stage0(), testing::StageEndpoint(1), proto::MsgType::kPipeActivation, t,
                {Floats(4 * s.width()), Floats(4)});
  absl::Status st = s.Join();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("expected the activation of training step 0 micro-batch 1"),
            absl::string_view::npos)
      << st;
}

TEST(PipelineFailure, AbortFromANeighbourStopsTheStageWithItsReason) {
  LoneStage1 s;
  proto::PipeTransfer t;
  t.from_stage = 0;
  t.reason = "INTERNAL: the data reader broke";
  EXPECT_TRUE(
      SendRaw(s.stage0(), testing::StageEndpoint(1), proto::MsgType::kPipeAbort, t, {}).ok());
  absl::Status st = s.Join();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted);
  EXPECT_NE(st.message().find("stage 0 (worker 0) of replica 0 failed: INTERNAL: the data reader"),
            absl::string_view::npos)
      << st;
}

TEST(PipelineFailure, DeadMiddleStageStopsItsNeighboursNamingIt) {
  Fixture f;
  StageHarness harness(Options(), *f.model, 3, 4, PipeSchedule::k1F1B, 16);
  // Stage 1 never computes and its node goes away, like a killed process.
  harness.node(1).SetComm(nullptr);
  harness.node(1).Stop();
  absl::Status status[3];
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int k : {0, 2}) {
    threads.emplace_back([&, k] {
      StageStepInputs in;
      in.step = 0;
      if (k == 0) {
        in.batch = f.batch;
        in.plan = &f.plan;
      }
      in.params = &f.params;
      std::vector<std::vector<float>> g = f.shapes;
      GradRefs refs;
      for (auto& v : g) refs.tables.push_back(v.data());
      in.grads = &refs;
      status[k] = harness.runner(k).TrainStep(in).status();
    });
  }
  for (auto& t : threads) t.join();
  const absl::Duration took = absl::Now() - start;
  // Ping every 200 ms, answer within 2 s (LinkOptions): well under 5 s.
  EXPECT_LT(took, absl::Seconds(5));
  for (int k : {0, 2}) {
    EXPECT_EQ(status[k].code(), absl::StatusCode::kUnavailable) << status[k];
    EXPECT_NE(status[k].message().find("stage 1 (worker 1) is not responding"),
              absl::string_view::npos)
        << status[k];
  }
}

}  // namespace
}  // namespace pstrain::worker
