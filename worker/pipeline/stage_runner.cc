#include "worker/pipeline/stage_runner.h"

#include "model/graph/graph_head.h"

#include <time.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/step_checks.h"
#include "model/nn/cpu_device.h"

namespace pstrain::worker {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The state of one micro-batch between its forward and its backward.
struct StageRunner::Slot {
  int microbatch = -1;
  int rows = 0;
  Buffer input;                           // received activations (stages > 0)
  Buffer labels;                          // [rows], passed on to the next stage
  HeadInputs head_in;                     // stage 0
  std::unique_ptr<HeadActivations> head;  // stage 0
  nn::DeviceBuffer z;                     // stage 0: the head's output
  StackActivations tower;
  Buffer output;                     // sent activations (not the last stage)
  nn::DeviceBuffer logits, dlogits;  // last stage

  nn::ConstMatrixView x(int width) const {
    return input.empty() ? nn::ConstMatrixView(z.as(), rows, width)
                         : nn::ConstMatrixView(input.as<float>().data(), rows, width);
  }
};

struct StageRunner::StepState {
  const StageStepInputs* in = nullptr;
  int rows = 0;
  int microbatches = 0;
  std::vector<Slot*> slots;  // by micro-batch
  int backwards_done = 0;
  absl::Time start;
  StageStepStats stats;
};

namespace {

// Row range of micro-batch m of n over `rows` rows (sizes differ by <= 1).
int RowBegin(int rows, int n, int m) {
  return static_cast<int>(static_cast<int64_t>(m) * rows / n);
}

// Wall and CPU time of one op.
class OpTimer {
 public:
  OpTimer() : wall_(absl::Now()), cpu_(ThreadCpuSeconds()) {}
  double wall() const { return absl::ToDoubleSeconds(absl::Now() - wall_); }
  double cpu() const { return ThreadCpuSeconds() - cpu_; }

 private:
  absl::Time wall_;
  double cpu_;
};

std::string Describe(const proto::PipeTransfer& t) {
  static const char* kPhases[] = {"training", "evaluation", "evaluation end", "training end",
                                  "end"};
  const int p = static_cast<int>(t.phase);
  return absl::StrCat(p <= 4 ? kPhases[p] : "unknown", " step ", t.step, " micro-batch ",
                      t.microbatch, " of ", t.num_microbatches, " (", t.rows, " rows)");
}

}  // namespace

StageRunner::StageRunner(const ModelOptions& model_options, const StageRunnerOptions& options,
                         PipeComm* comm, std::unique_ptr<nn::Device> device)
    : model_options_(model_options), options_(options), comm_(comm), device_(std::move(device)) {}

StageRunner::~StageRunner() = default;

absl::StatusOr<std::unique_ptr<StageRunner>> StageRunner::Create(
    const ModelOptions& model_options, const Model& model, const PipelineModelSpec& spec,
    const StagePartition& partition, const StageRunnerOptions& options, PipeComm* comm) {
  if (options.stages != partition.stages() || options.stage < 0 ||
      options.stage >= options.stages || options.microbatches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", options.stage, " of ", options.stages,
                                                   " with ", options.microbatches,
                                                   " micro-batches does not fit the partition"));
  }
  if (options.stages > 1 && comm == nullptr) {
    return absl::InvalidArgumentError("a stage of a multi-stage pipeline needs its links");
  }
  const TensorParallelLayout* tp = options.tp_layout;
  if (tp != nullptr && tp->tp() > 1 &&
      (options.tp_group == nullptr || options.tp_group->size() != tp->tp() ||
       options.tp_group->rank() != options.tp_rank)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor-parallel rank ", options.tp_rank, " of ",
                                                   tp->tp(), " needs its group's collective"));
  }
  std::unique_ptr<StageRunner> r(
      new StageRunner(model_options, options, comm, nn::CreateCpuDevice()));
  std::vector<LinearSpec> layers =
      tp != nullptr ? tp->StageLayers(options.stage, options.tp_rank)
                    : std::vector<LinearSpec>(spec.tower.begin() + partition.begin(options.stage),
                                              spec.tower.begin() + partition.end(options.stage));
  for (const LinearSpec& l : layers) {
    r->dense_tables_.push_back(l.weight);
    r->dense_tables_.push_back(l.bias);
  }
  r->in_width_ = layers.front().in;
  r->tower_ = std::make_unique<LayerStack>(std::move(layers), options.tp_group);
  if (r->first()) {
    PS_ASSIGN_OR_RETURN(r->head_, CreateGraphFeatureHead(model_options, model));
    r->sparse_fields_ = model.sparse_fields();
    for (uint32_t t : model.sparse_tables()) r->sparse_dims_.push_back(model.tables()[t].dim);
    if (r->head_->out_width() != r->in_width_) {
      return absl::InternalError(absl::StrCat("the head writes ", r->head_->out_width(),
                                              " columns, the tower reads ", r->in_width_));
    }
    for (uint32_t t : r->head_->dense_tables()) r->dense_tables_.push_back(t);
    r->sparse_tables_.assign(model.sparse_tables().begin(), model.sparse_tables().end());
  }
  r->pushed_tables_ =
      tp != nullptr ? tp->PushedTables(r->dense_tables_, options.tp_rank) : r->dense_tables_;
  r->eval_slot_ = std::make_unique<Slot>();
  if (r->first()) r->eval_slot_->head = r->head_->NewActivations();
  return r;
}

StageRunner::Slot* StageRunner::Acquire() {
  Slot* s = nullptr;
  if (!free_.empty()) {
    s = free_.back();
    free_.pop_back();
  } else {
    slots_.push_back(std::make_unique<Slot>());
    s = slots_.back().get();
    if (first()) s->head = head_->NewActivations();
  }
  max_live_ = std::max(max_live_, ++live_);
  return s;
}

void StageRunner::Release(Slot* slot) {
  slot->input = Buffer();
  slot->labels = Buffer();
  slot->output = Buffer();
  slot->microbatch = -1;
  free_.push_back(slot);
  --live_;
}

void StageRunner::BindRows(const Batch& batch, const BatchPlan& plan, int begin, int rows,
                           Slot* slot) const {
  slot->rows = rows;
  slot->head_in.dense = nn::ConstMatrixView(
      batch.dense.data() + static_cast<size_t>(begin) * batch.num_dense, rows, batch.num_dense);
  // Each table's fields' bags, one field's ids after the other in its index;
  // offsets are positions in the whole batch's.
  slot->head_in.bags.clear();
  slot->head_in.bag_begin.resize(plan.lookups.size());
  for (size_t s = 0; s < plan.lookups.size(); ++s) {
    slot->head_in.bag_begin[s] = static_cast<uint32_t>(slot->head_in.bags.size());
    const uint32_t* index = plan.lookups[s].index.data();
    for (int f : sparse_fields_[s]) {
      const uint32_t* offsets = batch.offsets[f].data() + begin;
      slot->head_in.bags.push_back(nn::Bags{index, offsets, rows, offsets});
      index += batch.ids[f].size();
    }
  }
}

absl::Status StageRunner::ForwardSlot(const ParamRefs& params, Slot* s, bool train) {
  nn::Device& dev = *device_;
  const int n = s->rows;
  if (first()) {
    PS_RETURN_IF_ERROR(s->z.ReserveElements(&dev, static_cast<size_t>(n) * in_width_));
    PS_RETURN_IF_ERROR(head_->Forward(dev, s->head_in, params.tables, s->head.get(),
                                      nn::MatrixView(s->z.as(), n, in_width_)));
  }
  nn::MatrixView out;
  if (last()) {
    PS_RETURN_IF_ERROR(s->logits.ReserveElements(&dev, n));
    out = nn::MatrixView(s->logits.as(), n, 1);
  } else {
    uint8_t* data = nullptr;
    s->output = Buffer::Allocate(sizeof(float) * static_cast<size_t>(n) * out_width(), &data);
    out = nn::MatrixView(reinterpret_cast<float*>(data), n, out_width());
  }
  PS_RETURN_IF_ERROR(tower_->Forward(dev, s->x(in_width_), params.tables, &s->tower, out));
  if (train && last()) {
    PS_RETURN_IF_ERROR(s->dlogits.ReserveElements(&dev, n));
  }
  return absl::OkStatus();
}

absl::Status StageRunner::Forward(StepState& st, int mb) {
  Slot* s = Acquire();
  st.slots[mb] = s;
  s->microbatch = mb;
  const int64_t step = st.in->step;
  if (first()) {
    const int begin = RowBegin(st.rows, st.microbatches, mb);
    const int end = RowBegin(st.rows, st.microbatches, mb + 1);
    BindRows(*st.in->batch, *st.in->plan, begin, end - begin, s);
    s->labels =
        Buffer(st.in->batch->labels.data() + begin, sizeof(float) * (end - begin), st.in->batch);
  } else {
    PS_ASSIGN_OR_RETURN(PipeReceived rec,
                        comm_->Receive(PipeDir::kPrev, absl::StrCat("the activation of step ", step,
                                                                    " micro-batch ", mb)));
    const proto::PipeTransfer& t = rec.tag;
    if (t.phase != proto::PipePhase::kTrain || t.step != step || t.microbatch != mb ||
        t.num_microbatches != st.microbatches || t.step_rows != st.rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          comm_->SelfName(), " expected the activation of training step ", step, " micro-batch ",
          mb, " of ", st.microbatches, " (", st.rows, " rows in the batch) from ",
          comm_->NeighbourName(PipeDir::kPrev), ", got ", Describe(t)));
    }
    s->rows = t.rows;
    s->input = std::move(rec.data);
    s->labels = std::move(rec.labels);
  }
  OpTimer timer;
  PS_RETURN_IF_ERROR(ForwardSlot(*st.in->params, s, /*train=*/true));
  if (last()) {
    PS_ASSIGN_OR_RETURN(
        double loss, device_->SigmoidBceLoss(s->logits.as(), s->labels.as<float>().data(), s->rows,
                                             s->dlogits.as()));
    st.stats.loss_sum += loss;
  }
  st.stats.forward_cpu[mb] = static_cast<float>(timer.cpu());
  st.stats.busy_seconds += timer.wall();
  if (last()) return absl::OkStatus();
  proto::PipeTransfer t;
  t.phase = proto::PipePhase::kTrain;
  t.step = step;
  t.microbatch = mb;
  t.num_microbatches = st.microbatches;
  t.step_rows = st.rows;
  t.rows = s->rows;
  t.cols = out_width();
  return comm_->Send(PipeDir::kNext, std::move(t), {s->output, s->labels});
}

proto::PipeStageReport StageRunner::OwnReport(const StepState& st) const {
  proto::PipeStageReport r;
  r.stage = options_.stage;
  r.forward_seconds = st.stats.forward_cpu;
  r.backward_seconds = st.stats.backward_cpu;
  r.busy_seconds = busy_total_ + st.stats.busy_seconds;
  r.wait_seconds = comm_ != nullptr ? comm_->wait_seconds() : 0;
  r.span_seconds = absl::ToDoubleSeconds(absl::Now() - first_start_);
  r.bytes_sent = comm_ != nullptr ? comm_->bytes_sent() : 0;
  r.max_live = max_live_;
  return r;
}

absl::Status StageRunner::Backward(StepState& st, int mb) {
  Slot* s = st.slots[mb];
  nn::Device& dev = *device_;
  const int n = s->rows;
  const int64_t step = st.in->step;
  const bool last_mb = mb + 1 == st.microbatches;
  nn::MatrixView d_out;
  if (last()) {
    d_out = nn::MatrixView(s->dlogits.as(), n, 1);
  } else {
    PS_ASSIGN_OR_RETURN(PipeReceived rec,
                        comm_->Receive(PipeDir::kNext, absl::StrCat("the gradient of step ", step,
                                                                    " micro-batch ", mb)));
    const proto::PipeTransfer& t = rec.tag;
    if (t.phase != proto::PipePhase::kTrain || t.step != step || t.microbatch != mb ||
        t.rows != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          comm_->SelfName(), " expected the gradient of training step ", step, " micro-batch ", mb,
          " (", n, " rows) from ", comm_->NeighbourName(PipeDir::kNext), ", got ", Describe(t)));
    }
    PS_RETURN_IF_ERROR(d_out_.ReserveElements(&dev, static_cast<size_t>(n) * out_width()));
    d_out = nn::MatrixView(d_out_.as(), n, out_width());
    PS_RETURN_IF_ERROR(dev.CopyToDevice(d_out.data, rec.data.data(), rec.data.size()));
    if (last_mb) {
      st.stats.loss_sum = t.loss_sum;
      st.stats.reports = t.reports;
    }
  }
  OpTimer timer;
  nn::MatrixView dx;
  Buffer dx_buffer;
  if (first()) {
    PS_RETURN_IF_ERROR(dz_.ReserveElements(&dev, static_cast<size_t>(n) * in_width_));
    dx = nn::MatrixView(dz_.as(), n, in_width_);
  } else {
    uint8_t* data = nullptr;
    dx_buffer = Buffer::Allocate(sizeof(float) * static_cast<size_t>(n) * in_width_, &data);
    dx = nn::MatrixView(reinterpret_cast<float*>(data), n, in_width_);
  }
  nn::ConstMatrixView out = last()
                                ? nn::ConstMatrixView(s->logits.as(), n, 1)
                                : nn::ConstMatrixView(s->output.as<float>().data(), n, out_width());
  const bool accumulate = st.backwards_done > 0;
  PS_RETURN_IF_ERROR(tower_->Backward(dev, s->x(in_width_), st.in->params->tables, s->tower, out,
                                      d_out, st.in->grads->tables, dx, accumulate));
  if (first()) {
    PS_RETURN_IF_ERROR(head_->Backward(dev, s->head_in, st.in->params->tables, *s->head, dx,
                                       st.in->grads->tables, accumulate));
  }
  ++st.backwards_done;
  st.stats.backward_cpu[mb] = static_cast<float>(timer.cpu());
  st.stats.busy_seconds += timer.wall();
  Release(s);
  st.slots[mb] = nullptr;
  if (first()) return absl::OkStatus();
  proto::PipeTransfer t;
  t.phase = proto::PipePhase::kTrain;
  t.step = step;
  t.microbatch = mb;
  t.num_microbatches = st.microbatches;
  t.step_rows = st.rows;
  t.rows = n;
  t.cols = in_width_;
  if (last_mb) {
    t.loss_sum = st.stats.loss_sum;
    t.reports.push_back(OwnReport(st));
    t.reports.insert(t.reports.end(), st.stats.reports.begin(), st.stats.reports.end());
  }
  return comm_->Send(PipeDir::kPrev, std::move(t), {std::move(dx_buffer)});
}

absl::StatusOr<StageStepStats> StageRunner::TrainStep(const StageStepInputs& in) {
  if (in.params == nullptr || in.grads == nullptr) {
    return absl::InvalidArgumentError("a training step needs parameters and gradient outputs");
  }
  const absl::Time start = absl::Now();
  const double wait0 = comm_ != nullptr ? comm_->wait_seconds() : 0;
  if (first_start_ == absl::InfinitePast()) first_start_ = start;
  StepState st;
  st.in = &in;
  st.start = start;
  if (first()) {
    if (in.batch == nullptr || in.plan == nullptr) {
      return absl::InvalidArgumentError("stage 0 needs the step's batch and plan");
    }
    PS_RETURN_IF_ERROR(CheckBatch(*in.batch, model_options_, /*needs_labels=*/true));
    if (in.plan->lookups.size() != sparse_tables_.size()) {
      return absl::InvalidArgumentError("the plan does not match the model's sparse tables");
    }
    st.rows = in.batch->size;
    st.microbatches = std::min(options_.microbatches, st.rows);
    for (size_t s = 0; s < sparse_tables_.size(); ++s) {
      const size_t n = in.plan->lookups[s].unique_ids.size() * sparse_dims_[s];
      if (n > 0) {
        PS_RETURN_IF_ERROR(device_->Zero(in.grads->tables[sparse_tables_[s]], sizeof(float) * n));
      }
    }
  } else {
    PS_ASSIGN_OR_RETURN(
        proto::PipeTransfer t,
        comm_->Peek(PipeDir::kPrev, absl::StrCat("the first activation of step ", in.step)));
    if (t.phase != proto::PipePhase::kTrain || t.step != in.step || t.microbatch != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          comm_->SelfName(), " expected the first activation of training step ", in.step, " from ",
          comm_->NeighbourName(PipeDir::kPrev), ", got ", Describe(t)));
    }
    st.rows = static_cast<int>(t.step_rows);
    st.microbatches = t.num_microbatches;
  }
  st.slots.assign(st.microbatches, nullptr);
  st.stats.rows = st.rows;
  st.stats.microbatches = st.microbatches;
  st.stats.forward_cpu.assign(st.microbatches, 0.0f);
  st.stats.backward_cpu.assign(st.microbatches, 0.0f);
  for (const PipeOp& op :
       BuildSchedule(options_.schedule, options_.stages, options_.stage, st.microbatches)) {
    PS_RETURN_IF_ERROR(op.kind == PipeOpKind::kForward ? Forward(st, op.microbatch)
                                                       : Backward(st, op.microbatch));
  }
  st.stats.span_seconds = absl::ToDoubleSeconds(absl::Now() - start);
  st.stats.wait_seconds = (comm_ != nullptr ? comm_->wait_seconds() : 0) - wait0;
  // This stage's report leads the list (the later stages' came with the
  // last gradient; the last stage has none).
  st.stats.reports.insert(st.stats.reports.begin(), OwnReport(st));
  busy_total_ += st.stats.busy_seconds;
  span_total_ += st.stats.span_seconds;
  return std::move(st.stats);
}

absl::Status StageRunner::EvalBatch(int64_t round, std::shared_ptr<const Batch> batch,
                                    const BatchPlan& plan, const ParamRefs& params) {
  PS_RETURN_IF_ERROR(CheckBatch(*batch, model_options_, /*needs_labels=*/true));
  const int rows = batch->size;
  const int mbs = std::min(options_.microbatches, rows);
  Slot* s = eval_slot_.get();
  for (int mb = 0; mb < mbs; ++mb) {
    const int begin = RowBegin(rows, mbs, mb);
    const int end = RowBegin(rows, mbs, mb + 1);
    BindRows(*batch, plan, begin, end - begin, s);
    s->labels = Buffer(batch->labels.data() + begin, sizeof(float) * (end - begin), batch);
    PS_RETURN_IF_ERROR(ForwardSlot(params, s, /*train=*/false));
    if (last()) {
      const size_t at = probs_.size();
      probs_.resize(at + s->rows);
      PS_RETURN_IF_ERROR(device_->Sigmoid(s->logits.as(), s->rows, probs_.data() + at));
      labels_.insert(labels_.end(), batch->labels.begin() + begin, batch->labels.begin() + end);
      continue;
    }
    proto::PipeTransfer t;
    t.phase = proto::PipePhase::kEval;
    t.step = round;
    t.microbatch = mb;
    t.num_microbatches = mbs;
    t.step_rows = rows;
    t.rows = s->rows;
    t.cols = out_width();
    PS_RETURN_IF_ERROR(comm_->Send(PipeDir::kNext, std::move(t), {s->output, s->labels}));
  }
  s->output = Buffer();
  s->labels = Buffer();
  return absl::OkStatus();
}

absl::Status StageRunner::EvalMicrobatch(const PipeReceived& msg, const ParamRefs& params) {
  if (msg.tag.phase != proto::PipePhase::kEval) {
    return absl::InternalError("EvalMicrobatch takes evaluation micro-batches");
  }
  Slot* s = eval_slot_.get();
  s->rows = msg.tag.rows;
  s->input = msg.data;
  s->labels = msg.labels;
  PS_RETURN_IF_ERROR(ForwardSlot(params, s, /*train=*/false));
  if (last()) {
    const size_t at = probs_.size();
    probs_.resize(at + s->rows);
    PS_RETURN_IF_ERROR(device_->Sigmoid(s->logits.as(), s->rows, probs_.data() + at));
    auto l = s->labels.as<float>();
    labels_.insert(labels_.end(), l.begin(), l.end());
  } else {
    proto::PipeTransfer t = msg.tag;
    t.rows = s->rows;
    t.cols = out_width();
    PS_RETURN_IF_ERROR(comm_->Send(PipeDir::kNext, std::move(t), {s->output, s->labels}));
  }
  s->input = Buffer();
  s->labels = Buffer();
  s->output = Buffer();
  return absl::OkStatus();
}

void StageRunner::TakeScores(std::vector<float>* probs, std::vector<float>* labels) {
  *probs = std::move(probs_);
  *labels = std::move(labels_);
  probs_.clear();
  labels_.clear();
}

}  // namespace pstrain::worker
