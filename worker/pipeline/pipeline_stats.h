// PipelineStats: the pipeline statistics of a run, from the per-step
// reports of every stage of one replica (stage 0 receives them with each
// step's last gradient):
//  - per stage: busy seconds (computing), seconds waiting for a neighbour,
//    wall seconds of training, activation + gradient bytes sent, the most
//    micro-batches held at once;
//  - bubble_wall: per stage, the fraction of its training wall time spent
//    waiting for a neighbour. Where stages share CPU cores (this project's
//    VM has one), a stage also waits while the others compute, so this
//    overstates the bubble of dedicated devices;
//  - bubble: every step replayed on dedicated cores from the measured CPU
//    seconds of each stage's forward and backward ops (ReplaySchedule), the
//    idle fraction averaged over stages and weighted by step length. This
//    is the schedule's bubble for the real op costs, without communication
//    latency. The first step (which allocates every buffer) is left out.
// Not thread-safe: one trainer thread.
#pragma once

#include <string>
#include <vector>

#include "proto_msgs/messages.h"
#include "worker/pipeline/pipeline_options.h"

namespace pstrain::worker {

class PipelineStats {
 public:
  PipelineStats(int stages, int microbatches, PipeSchedule schedule);

  // One step's reports, one per stage in stage order (others are ignored
  // for the replay).
  void AddStep(const std::vector<proto::PipeStageReport>& reports);

  int stages() const { return stages_; }
  // Replayed bubble over the steps so far (0 before any).
  double bubble() const;
  // Mean over stages of the wall-clock idle fraction.
  double bubble_wall() const;
  double ideal_bubble() const;
  // The latest report of each stage.
  const std::vector<proto::PipeStageReport>& latest() const { return latest_; }

  // The statistics as a JSON object (for metrics lines).
  std::string Json() const;
  // One log line: "bubble 0.12 (ideal 0.11, wall 0.48) | stage 0: busy ...".
  std::string LogLine() const;

 private:
  int stages_;
  int microbatches_;
  PipeSchedule schedule_;
  std::vector<proto::PipeStageReport> latest_;  // by stage
  double makespan_sum_ = 0;
  double busy_sum_ = 0;  // over stages and steps
  int64_t steps_ = 0;    // replayed
  int64_t seen_ = 0;
};

}  // namespace pstrain::worker
