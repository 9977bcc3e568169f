// Test harness: the P stages of one pipeline as threads of the test, each
// with its own RPC node on an in-process network, a PipeComm and a
// StageRunner, computing with fixed parameters (no servers). Each stage
// writes its gradients into its own arrays, so a test sees exactly what
// every stage would push.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/inproc_transport.h"
#include "common/rpc.h"
#include "model/models/model.h"
#include "proto_msgs/codec.h"
#include "worker/pipeline/pipe_comm.h"
#include "worker/pipeline/pipeline_model.h"
#include "worker/pipeline/stage_runner.h"

namespace pstrain::worker::testing {

// An RPC node on `net` at `endpoint` that answers pings and hands pipeline
// messages to *comm once it is set.
class StageNode {
 public:
  StageNode(InProcNetwork* net, const std::string& endpoint)
      : node_(std::make_unique<RpcNode>(std::make_unique<InProcTransport>(net))) {
    EXPECT_TRUE(node_->Bind(endpoint).ok());
    RpcNode* raw = node_.get();
    std::atomic<PipeComm*>* comm = &comm_;
    EXPECT_TRUE(node_
                    ->Start([raw, comm](RpcRequest&& req) {
                      auto d = proto::Decode(req.message);
                      if (!d.ok()) return;
                      PipeComm* c = comm->load();
                      if (d->type() == proto::MsgType::kPing) {
                        raw->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
                      } else if (c != nullptr) {
                        c->OnRequest(*d, req);
                      }
                    })
                    .ok());
  }
  ~StageNode() { Stop(); }
  void Stop() {
    if (node_ != nullptr) node_->Stop();
  }
  void SetComm(PipeComm* c) { comm_.store(c); }
  RpcNode* node() { return node_.get(); }

 private:
  std::unique_ptr<RpcNode> node_;
  std::atomic<PipeComm*> comm_{nullptr};
};

inline std::string StageEndpoint(int k) { return "stage" + std::to_string(k); }

// Link options of stage k of a pipeline cut by `partition`.
inline PipeCommOptions LinkOptions(const PipelineModelSpec& spec, const StagePartition& partition,
                                   int k, int microbatches, int max_rows) {
  PipeCommOptions o;
  o.stage = k;
  o.stages = partition.stages();
  o.rank = k;
  if (k > 0) {
    o.prev_endpoint = StageEndpoint(k - 1);
    o.prev_rank = k - 1;
    o.in_width = spec.tower[partition.begin(k)].in;
  }
  if (k + 1 < partition.stages()) {
    o.next_endpoint = StageEndpoint(k + 1);
    o.next_rank = k + 1;
    o.out_width = spec.tower[partition.end(k) - 1].out;
  }
  o.max_rows = max_rows;
  o.max_microbatches = microbatches;
  o.window = microbatches + 2;
  o.timeout = absl::Seconds(20);
  o.ping_interval = absl::Milliseconds(200);
  o.ping_timeout = absl::Seconds(2);
  return o;
}

class StageHarness {
 public:
  StageHarness(const ModelOptions& options, const Model& model, int stages, int microbatches,
               PipeSchedule schedule, int max_rows, const std::string& stage_layers = "")
      : model_(model) {
    auto spec = DescribePipelineModel(options, model, max_rows);
    EXPECT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    auto partition = PartitionTower(spec_, stages, stage_layers);
    EXPECT_TRUE(partition.ok()) << partition.status();
    partition_ = *partition;
    for (int k = 0; k < stages; ++k) {
      nodes_.push_back(std::make_unique<StageNode>(&net_, StageEndpoint(k)));
    }
    for (int k = 0; k < stages; ++k) {
      if (stages > 1) {
        comms_.push_back(std::make_unique<PipeComm>(
            nodes_[k]->node(), LinkOptions(spec_, partition_, k, microbatches, max_rows)));
        nodes_[k]->SetComm(comms_.back().get());
      }
      StageRunnerOptions ro;
      ro.stage = k;
      ro.stages = stages;
      ro.microbatches = microbatches;
      ro.schedule = schedule;
      auto r = StageRunner::Create(options, model, spec_, partition_, ro,
                                   stages > 1 ? comms_[k].get() : nullptr);
      EXPECT_TRUE(r.ok()) << r.status();
      runners_.push_back(*std::move(r));
    }
  }
  ~StageHarness() {
    for (auto& n : nodes_) n->SetComm(nullptr);
    for (auto& n : nodes_) n->Stop();
  }

  int stages() const { return static_cast<int>(runners_.size()); }
  StageRunner& runner(int k) { return *runners_[k]; }
  PipeComm& comm(int k) { return *comms_[k]; }
  StageNode& node(int k) { return *nodes_[k]; }
  const PipelineModelSpec& spec() const { return spec_; }
  const StagePartition& partition() const { return partition_; }

  // One training step on every stage (threads). grads[k] receives stage k's
  // gradients (by table id; sized like `reference`, NaN where not written).
  struct StepResult {
    std::vector<absl::Status> status;
    std::vector<StageStepStats> stats;
    std::vector<std::vector<std::vector<float>>> grads;  // [stage][table]
  };
  StepResult RunStep(int64_t step, std::shared_ptr<const Batch> batch, const BatchPlan& plan,
                     const ParamRefs& params, const std::vector<std::vector<float>>& shapes) {
    const int p = stages();
    StepResult out;
    out.status.assign(p, absl::OkStatus());
    out.stats.resize(p);
    out.grads.assign(p, {});
    std::vector<GradRefs> refs(p);
    for (int k = 0; k < p; ++k) {
      for (const auto& s : shapes) out.grads[k].emplace_back(s.size(), NAN);
      for (auto& g : out.grads[k]) refs[k].tables.push_back(g.data());
    }
    std::vector<std::thread> threads;
    for (int k = 0; k < p; ++k) {
      threads.emplace_back([&, k] {
        StageStepInputs in;
        in.step = step;
        if (k == 0) {
          in.batch = batch;
          in.plan = &plan;
        }
        in.params = &params;
        in.grads = &refs[k];
        auto r = runners_[k]->TrainStep(in);
        if (r.ok()) {
          out.stats[k] = *std::move(r);
        } else {
          out.status[k] = r.status();
          if (!comms_.empty()) comms_[k]->Abort(r.status());
        }
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

 private:
  const Model& model_;
  PipelineModelSpec spec_;
  StagePartition partition_;
  InProcNetwork net_;
  std::vector<std::unique_ptr<StageNode>> nodes_;
  std::vector<std::unique_ptr<PipeComm>> comms_;
  std::vector<std::unique_ptr<StageRunner>> runners_;
};

// ||a - b|| / ||b|| (0 when both are zero).
inline double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  if (a.size() != b.size()) return INFINITY;
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

}  // namespace pstrain::worker::testing
