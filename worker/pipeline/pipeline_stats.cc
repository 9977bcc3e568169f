#include "worker/pipeline/pipeline_stats.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/json_line.h"
#include "worker/pipeline/schedule.h"

namespace pstrain::worker {
namespace {

template <class F>
std::string JsonArray(const std::vector<proto::PipeStageReport>& reports, F value) {
  std::vector<std::string> parts;
  for (const proto::PipeStageReport& r : reports) parts.push_back(value(r));
  return absl::StrCat("[", absl::StrJoin(parts, ","), "]");
}

double WallBubble(const proto::PipeStageReport& r) {
  return r.span_seconds > 0 ? r.wait_seconds / r.span_seconds : 0.0;
}

}  // namespace

PipelineStats::PipelineStats(int stages, int microbatches, PipeSchedule schedule)
    : stages_(stages), microbatches_(microbatches), schedule_(schedule), latest_(stages) {
  for (int k = 0; k < stages; ++k) latest_[k].stage = k;
}

void PipelineStats::AddStep(const std::vector<proto::PipeStageReport>& reports) {
  if (static_cast<int>(reports.size()) != stages_) return;
  std::vector<std::vector<double>> fwd(stages_), bwd(stages_);
  for (int k = 0; k < stages_; ++k) {
    const proto::PipeStageReport& r = reports[k];
    if (r.stage != k || r.forward_seconds.size() != reports[0].forward_seconds.size() ||
        r.backward_seconds.size() != r.forward_seconds.size()) {
      return;
    }
    latest_[k] = r;
    fwd[k].assign(r.forward_seconds.begin(), r.forward_seconds.end());
    bwd[k].assign(r.backward_seconds.begin(), r.backward_seconds.end());
  }
  // The first step allocates every buffer: not representative.
  if (fwd[0].empty() || ++seen_ == 1) return;
  auto replay = ReplaySchedule(schedule_, fwd, bwd);
  if (!replay.ok()) return;
  makespan_sum_ += replay->makespan;
  for (double b : replay->busy) busy_sum_ += b;
  ++steps_;
}

double PipelineStats::bubble() const {
  return makespan_sum_ > 0 ? 1.0 - busy_sum_ / (stages_ * makespan_sum_) : 0.0;
}

double PipelineStats::bubble_wall() const {
  double sum = 0;
  for (const auto& r : latest_) sum += WallBubble(r);
  return sum / stages_;
}

double PipelineStats::ideal_bubble() const { return IdealBubble(stages_, microbatches_); }

std::string PipelineStats::Json() const {
  JsonLine j;
  j.Add("stages", stages_)
      .Add("microbatches", microbatches_)
      .Add("schedule", ScheduleName(schedule_))
      .Add("bubble", bubble())
      .Add("ideal_bubble", ideal_bubble())
      .Add("bubble_wall", bubble_wall())
      .AddRaw(
          "stage_busy_seconds",
          JsonArray(latest_, [](const auto& r) { return absl::StrFormat("%.4f", r.busy_seconds); }))
      .AddRaw(
          "stage_wait_seconds",
          JsonArray(latest_, [](const auto& r) { return absl::StrFormat("%.4f", r.wait_seconds); }))
      .AddRaw(
          "stage_bubble_wall",
          JsonArray(latest_, [](const auto& r) { return absl::StrFormat("%.4f", WallBubble(r)); }))
      .AddRaw("stage_activation_bytes",
              JsonArray(latest_, [](const auto& r) { return absl::StrCat(r.bytes_sent); }))
      .AddRaw("stage_max_live_microbatches",
              JsonArray(latest_, [](const auto& r) { return absl::StrCat(r.max_live); }));
  return j.str();
}

std::string PipelineStats::LogLine() const {
  std::vector<std::string> parts;
  for (const auto& r : latest_) {
    parts.push_back(absl::StrFormat("stage %d: busy %.1fs, waits %.1fs (%.0f%%), sent %.1f MB",
                                    r.stage, r.busy_seconds, r.wait_seconds, 100 * WallBubble(r),
                                    r.bytes_sent / 1e6));
  }
  return absl::StrFormat("bubble %.3f (ideal %.3f, wall %.3f) | %s", bubble(), ideal_bubble(),
                         bubble_wall(), absl::StrJoin(parts, " | "));
}

}  // namespace pstrain::worker
