// The Trainer's exchange with the parameter servers within a step: a batch
// planned and its pull sent (with the last step's push, where it was held
// for it: KvClient::PushPull), the pulled parameters bound for the model,
// the gradient buffers, and the push (held for the next pull, or sent at
// once, or waited for). The step's order is Trainer::RunStep's.
#include "worker/trainer.h"

#include <optional>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {
namespace {

// The pull of a plan's rows, table by table; no `out`: the step reads the
// rows where they arrived.
std::vector<SparsePull> SparsePulls(const Model& model, const BatchPlan& plan) {
  const auto& sparse = model.sparse_tables();
  std::vector<SparsePull> pulls;
  pulls.reserve(sparse.size());
  for (size_t k = 0; k < sparse.size(); ++k) {
    pulls.push_back(SparsePull{sparse[k], plan.lookups[k].unique_ids, nullptr});
  }
  return pulls;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Trainer::Prepared>> Trainer::Prepare(
    std::shared_ptr<const Batch> batch, int64_t clock, bool issue) {
  auto p = std::make_unique<Prepared>();
  p->batch = std::move(batch);
  p->clock = clock;
  model_->Plan(*p->batch, &p->plan);
  if (p->plan.lookups.size() != model_->sparse_tables().size()) {
    return absl::InternalError("model plan does not match its sparse tables");
  }
  if (issue) p->pull = kv_->Pull(dense_tables_, SparsePulls(*model_, p->plan), clock);
  return p;
}

void Trainer::IssuePull(Prepared& p) {
  const std::vector<SparsePull> pulls = SparsePulls(*model_, p.plan);
  if (!held_push_) {
    p.pull = kv_->Pull(dense_tables_, pulls, p.clock);
    return;
  }
  HeldPush push = *std::exchange(held_push_, std::nullopt);
  std::tie(last_push_, p.pull) = kv_->PushPull(push.dense, push.sparse, push.samples, push.clock,
                                               dense_tables_, pulls, p.clock);
}

absl::Status Trainer::Bind(Prepared& p, ParamRefs* params) {
  PS_ASSIGN_OR_RETURN(p.dense, p.pull.Wait(&p.rows));
  params->tables.assign(model_->tables().size(), nullptr);
  for (size_t i = 0; i < dense_tables_.size(); ++i) {
    params->tables[dense_tables_[i]] = p.dense[i].as<float>().data();
  }
  const auto& sparse = model_->sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) {
    params->tables[sparse[k]] = p.rows[k].as<float>().data();
  }
  if (replica_ != nullptr) {
    for (uint32_t t : replica_->table_ids()) params->tables[t] = replica_->params(t);
  }
  return absl::OkStatus();
}

std::vector<Buffer> Trainer::BindGrads(const Prepared& p) {
  std::vector<Buffer> buffers(model_->tables().size());
  grads_.tables.assign(model_->tables().size(), nullptr);
  for (uint32_t t : dense_tables_) {
    uint8_t* data = nullptr;
    buffers[t] = Buffer::Allocate(model_->tables()[t].size * sizeof(float), &data);
    grads_.tables[t] = reinterpret_cast<float*>(data);
  }
  // The sparse gradients of all tables in one allocation, a slice each: the
  // push then leaves as one frame without a copy (common/frame_pack.h).
  const auto& sparse = model_->sparse_tables();
  auto grad_bytes = [&](size_t k) { return (p.rows[k].size() + 63) & ~size_t{63}; };
  size_t total = 0;
  for (size_t k = 0; k < sparse.size(); ++k) total += grad_bytes(k);
  uint8_t* data = nullptr;
  const Buffer all = Buffer::Allocate(total, &data);
  size_t offset = 0;
  for (size_t k = 0; k < sparse.size(); ++k) {
    buffers[sparse[k]] = all.Slice(offset, p.rows[k].size());
    grads_.tables[sparse[k]] = reinterpret_cast<float*>(data + offset);
    offset += grad_bytes(k);
  }
  if (replica_ != nullptr) {
    replica_->BeginStep();
    for (uint32_t t : replica_->table_ids()) grads_.tables[t] = replica_->grad(t);
    grads_.on_ready = [this](uint32_t t) { replica_->OnReady(t); };
  }
  return buffers;
}

absl::Status Trainer::PushGrads(const Prepared& p, const std::vector<Buffer>& grad_buffers,
                                const StepOutput& out) {
  std::vector<DensePush> dense_push;
  for (uint32_t t : dense_tables_) dense_push.push_back(DensePush{t, grad_buffers[t]});
  std::vector<SparsePush> sparse_push;
  const auto& sparse = model_->sparse_tables();
  for (size_t k = 0; k < sparse.size(); ++k) {
    sparse_push.push_back(
        SparsePush{sparse[k], p.plan.lookups[k].unique_ids, grad_buffers[sparse[k]]});
  }
  const auto samples = static_cast<uint32_t>(out.num_samples);
  if (hold_pushes_) {
    held_push_ = HeldPush{std::move(dense_push), std::move(sparse_push), samples, clock_, nullptr};
    return absl::OkStatus();
  }
  last_push_ = kv_->Push(dense_push, sparse_push, samples, clock_);
  if (replica_ == nullptr) return absl::OkStatus();
  // The sparse push travels while the dense buckets finish.
  absl::Time t0 = absl::Now();
  PS_RETURN_IF_ERROR(Annotate(replica_->Finish(samples, LrScheduleScale(warmup_, clock_)).status(),
                              absl::StrCat("allreduce of step ", clock_)));
  result_.wait_seconds += SecondsSince(t0);
  result_.allreduce_wait_seconds += replica_->last_wait_seconds();
  return absl::OkStatus();
}

absl::Status Trainer::WaitForLastPush() {
  if (last_push_.valid()) PS_RETURN_IF_ERROR(last_push_.Wait());
  if (held_push_) {
    HeldPush push = *std::exchange(held_push_, std::nullopt);
    last_push_ = kv_->Push(push.dense, push.sparse, push.samples, push.clock);
  }
  if (!last_push_.valid()) return absl::OkStatus();
  return last_push_.Wait();
}

}  // namespace pstrain::worker
