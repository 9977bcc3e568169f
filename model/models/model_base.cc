#include "model/models/model_base.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "model/models/step_checks.h"
#include "model/nn/loss.h"

namespace pstrain::worker {

absl::Status CheckWidths(const char* what, const std::vector<int>& widths) {
  for (int w : widths) {
    if (w < 1) {
      return absl::InvalidArgumentError(absl::StrCat(what, " has a layer of width ", w));
    }
  }
  return absl::OkStatus();
}

ModelBase::ModelBase(const ModelOptions& options, std::unique_ptr<nn::Device> device)
    : options_(options),
      device_(std::move(device)),
      registry_(options.dense_optimizer, options.sparse_optimizer, options.table_weight_decay,
                options.uniform_biases),
      ready_fn_([this](uint32_t table) { ReportReady(table); }) {}

void ModelBase::IndexTables() const {
  const auto& fields = registry_.sparse_fields();
  if (sparse_pos_.size() == registry_.tables().size() && plan_source_.size() == fields.size()) {
    return;
  }
  sparse_pos_.assign(registry_.tables().size(), -1);
  for (size_t s = 0; s < registry_.sparse_ids().size(); ++s) {
    sparse_pos_[registry_.sparse_ids()[s]] = static_cast<int>(s);
  }
  plan_source_.assign(fields.size(), -1);
  for (size_t s = 0; s < fields.size(); ++s) {
    for (size_t e = 0; e < s; ++e) {
      if (fields[e] == fields[s] && plan_source_[e] < 0) {
        plan_source_[s] = static_cast<int>(e);
        break;
      }
    }
  }
}

void ModelBase::Plan(const Batch& batch, BatchPlan* plan) const {
  IndexTables();
  const auto& fields = registry_.sparse_fields();
  plan->lookups.resize(fields.size());
  for (size_t s = 0; s < fields.size(); ++s) {
    SparseLookup& lookup = plan->lookups[s];
    if (plan_source_[s] >= 0) {  // e.g. wide and deep tables of one field
      const SparseLookup& same = plan->lookups[plan_source_[s]];
      lookup.unique_ids.assign(same.unique_ids.begin(), same.unique_ids.end());
      lookup.index.assign(same.index.begin(), same.index.end());
      continue;
    }
    size_t total = 0;
    for (int f : fields[s]) {
      if (f < static_cast<int>(batch.ids.size())) total += batch.ids[f].size();
    }
    lookup.unique_ids.clear();
    lookup.unique_ids.reserve(total);
    lookup.index.resize(total);
    dedup_.Reset(total);
    uint32_t* out = lookup.index.data();
    for (int f : fields[s]) {
      if (f >= static_cast<int>(batch.ids.size())) continue;  // Validate() reports it
      for (uint64_t id : batch.ids[f]) *out++ = dedup_.FindOrInsert(id, &lookup.unique_ids);
    }
  }
}

absl::Status ModelBase::Validate(const Batch& batch, const BatchPlan& plan,
                                 const ParamRefs& params, const GradRefs* grads) const {
  PS_RETURN_IF_ERROR(CheckBatch(batch, options_, /*needs_labels=*/grads != nullptr));
  // A training step needs every head's label column (NaN where a row has none).
  for (const ModelHead& h : heads_) {
    if (grads != nullptr &&
        (h.label > batch.num_extra_labels ||
         batch.extra_labels.size() != static_cast<size_t>(batch.size) * batch.num_extra_labels)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "head \"", h.name, "\" learns the batch's label ", h.label, ", the batch has ",
          1 + batch.num_extra_labels, " (its schema's \"labels\" are not in the data)"));
    }
  }
  PS_RETURN_IF_ERROR(CheckPlan(batch, plan, registry_));
  const size_t num_tables = registry_.tables().size();
  if (params.tables.size() != num_tables) {
    return absl::InvalidArgumentError(absl::StrCat("params bind ", params.tables.size(),
                                                   " tables, model has ", num_tables));
  }
  if (grads != nullptr && grads->tables.size() != num_tables) {
    return absl::InvalidArgumentError(absl::StrCat("grads bind ", grads->tables.size(),
                                                   " tables, model has ", num_tables));
  }
  for (size_t t = 0; t < num_tables; ++t) {
    if (TableFloats(static_cast<uint32_t>(t), plan) == 0) continue;
    if (params.tables[t] == nullptr || (grads != nullptr && grads->tables[t] == nullptr)) {
      return absl::InvalidArgumentError(
          absl::StrCat("table ", registry_.tables()[t].name, " is not bound"));
    }
  }
  return absl::OkStatus();
}

size_t ModelBase::TableFloats(uint32_t table, const BatchPlan& plan) const {
  const TableSpec& spec = registry_.tables()[table];
  if (spec.kind == TableKind::kDense) return spec.size;
  return plan.lookups[sparse_pos_[table]].unique_ids.size() * spec.dim;
}

absl::Status ModelBase::Stage(const Batch& batch, const BatchPlan& plan, const ParamRefs& params,
                              const GradRefs* grads) {
  const int rows = batch.size;
  const size_t outputs = static_cast<size_t>(rows) * heads_.size();
  PS_RETURN_IF_ERROR(logits_.ReserveElements(device_.get(), outputs));
  PS_RETURN_IF_ERROR(dlogits_.ReserveElements(device_.get(), outputs));
  chunk_rows_ = device_->host_memory() ? std::min(rows, kCpuChunkRows) : rows;
  PS_RETURN_IF_ERROR(Reserve(chunk_rows_));
  const size_t num_tables = registry_.tables().size();
  step_.table_floats.resize(num_tables);
  for (size_t t = 0; t < num_tables; ++t) {
    step_.table_floats[t] = TableFloats(static_cast<uint32_t>(t), plan);
  }
  if (!device_->host_memory()) return StageOnDevice(batch, plan, params, grads);

  step_.batch = rows;
  step_.dense = nn::ConstMatrixView(batch.dense.data(), rows, batch.num_dense);
  step_.labels = grads != nullptr ? batch.labels.data() : nullptr;
  step_.params.assign(params.tables.begin(), params.tables.end());
  if (grads != nullptr) {
    step_.grads.assign(grads->tables.begin(), grads->tables.end());
  } else {
    step_.grads.clear();
  }
  BindBags(batch, [&](size_t s) { return plan.lookups[s].index.data(); },
           [&](int f) { return batch.offsets[f].data(); });
  return absl::OkStatus();
}

template <class IndexOf, class OffsetsOf>
void ModelBase::BindBags(const Batch& batch, IndexOf index_of, OffsetsOf offsets_of) {
  const auto& fields = registry_.sparse_fields();
  step_.bags.clear();
  step_.bag_begin.resize(fields.size());
  for (size_t s = 0; s < fields.size(); ++s) {
    step_.bag_begin[s] = static_cast<uint32_t>(step_.bags.size());
    const uint32_t* index = index_of(s);
    for (int f : fields[s]) {  // a table's fields follow each other in its index
      step_.bags.push_back(nn::Bags{index, offsets_of(f), batch.size, batch.offsets[f].data()});
      index += batch.ids[f].size();
    }
  }
}

absl::Status ModelBase::StageOnDevice(const Batch& batch, const BatchPlan& plan,
                                      const ParamRefs& params, const GradRefs* grads) {
  PS_RETURN_IF_ERROR(StageInputsOnDevice(batch, plan, /*with_labels=*/grads != nullptr));
  nn::Device* dev = device_.get();
  // Parameters (and gradients) of all tables share one device buffer each.
  const size_t num_tables = registry_.tables().size();
  table_offset_.assign(num_tables + 1, 0);
  for (size_t t = 0; t < num_tables; ++t) {
    table_offset_[t + 1] = table_offset_[t] + step_.table_floats[t];
  }
  const size_t total = table_offset_[num_tables];
  PS_RETURN_IF_ERROR(dev_params_.ReserveElements(dev, total));
  step_.params.resize(num_tables);
  for (size_t t = 0; t < num_tables; ++t) {
    float* p = dev_params_.as() + table_offset_[t];
    if (step_.table_floats[t] > 0) {
      PS_RETURN_IF_ERROR(dev->CopyToDevice(p, params.tables[t], 4 * step_.table_floats[t]));
    }
    step_.params[t] = p;
  }
  step_.grads.clear();
  if (grads != nullptr) {
    PS_RETURN_IF_ERROR(dev_grads_.ReserveElements(dev, total));
    step_.grads.resize(num_tables);
    for (size_t t = 0; t < num_tables; ++t) step_.grads[t] = dev_grads_.as() + table_offset_[t];
  }
  return absl::OkStatus();
}

absl::Status ModelBase::StageInputsOnDevice(const Batch& batch, const BatchPlan& plan,
                                            bool with_labels) {
  const int rows = batch.size;
  nn::Device* dev = device_.get();
  // All offsets and plan indices travel in one transfer, dense + labels in another.
  const size_t offsets_count = static_cast<size_t>(batch.num_sparse) * (rows + 1);
  size_t u32_count = offsets_count;
  for (const SparseLookup& lookup : plan.lookups) u32_count += lookup.index.size();
  host_u32_.resize(u32_count);
  uint32_t* u = host_u32_.data();
  for (int f = 0; f < batch.num_sparse; ++f) {
    std::memcpy(u + static_cast<size_t>(f) * (rows + 1), batch.offsets[f].data(),
                sizeof(uint32_t) * (rows + 1));
  }
  index_offset_.assign(plan.lookups.size(), 0);
  size_t cursor = offsets_count;
  for (size_t s = 0; s < plan.lookups.size(); ++s) {
    index_offset_[s] = cursor;
    const auto& index = plan.lookups[s].index;
    if (!index.empty()) std::memcpy(u + cursor, index.data(), sizeof(uint32_t) * index.size());
    cursor += index.size();
  }
  PS_RETURN_IF_ERROR(dev_u32_.ReserveElements<uint32_t>(dev, u32_count));
  PS_RETURN_IF_ERROR(dev->CopyToDevice(dev_u32_.data(), u, sizeof(uint32_t) * u32_count));
  const uint32_t* du = dev_u32_.as<uint32_t>();
  BindBags(batch, [&](size_t s) { return du + index_offset_[s]; },
           [&](int f) { return du + static_cast<size_t>(f) * (rows + 1); });

  const size_t dense_count = batch.dense.size();
  const size_t f32_count = dense_count + (with_labels ? rows : 0);
  host_f32_.resize(f32_count);
  if (dense_count > 0) std::memcpy(host_f32_.data(), batch.dense.data(), 4 * dense_count);
  if (with_labels) std::memcpy(host_f32_.data() + dense_count, batch.labels.data(), 4 * rows);
  PS_RETURN_IF_ERROR(dev_f32_.ReserveElements(dev, f32_count));
  PS_RETURN_IF_ERROR(dev->CopyToDevice(dev_f32_.data(), host_f32_.data(), 4 * f32_count));
  step_.batch = rows;
  step_.dense = nn::ConstMatrixView(dev_f32_.as(), rows, batch.num_dense);
  step_.labels = with_labels ? dev_f32_.as() + dense_count : nullptr;
  return absl::OkStatus();
}

void ModelBase::SliceStep(int begin, int rows) {
  chunk_.batch = rows;
  chunk_.dropout = nn::DropoutRun{};
  chunk_.dense = step_.dense.Rows(begin, rows);
  chunk_.labels = step_.labels != nullptr ? step_.labels + begin : nullptr;
  chunk_.params.assign(step_.params.begin(), step_.params.end());
  chunk_.grads.assign(step_.grads.begin(), step_.grads.end());
  chunk_.bag_begin.assign(step_.bag_begin.begin(), step_.bag_begin.end());
  chunk_.table_floats.assign(step_.table_floats.begin(), step_.table_floats.end());
  chunk_.bags.resize(step_.bags.size());
  for (size_t i = 0; i < step_.bags.size(); ++i) {
    // Offsets are absolute positions in the plan's index: shifting the
    // offsets pointer selects the rows.
    const nn::Bags& all = step_.bags[i];
    chunk_.bags[i] = nn::Bags{all.index, all.offsets + begin, rows,
                              all.host_offsets != nullptr ? all.host_offsets + begin : nullptr};
  }
}

absl::Status ModelBase::ZeroSparseGrads() {
  for (uint32_t t : registry_.sparse_ids()) {
    const size_t n = step_.table_floats[t];
    if (n > 0) PS_RETURN_IF_ERROR(device_->Zero(step_.grads[t], sizeof(float) * n));
  }
  return absl::OkStatus();
}

absl::Status ModelBase::ExportGrads(const GradRefs& grads) {
  if (device_->host_memory()) return absl::OkStatus();  // written in place
  const size_t num_tables = registry_.tables().size();
  const size_t total = table_offset_[num_tables];
  host_grads_.resize(total);
  PS_RETURN_IF_ERROR(device_->CopyToHost(host_grads_.data(), dev_grads_.data(), 4 * total));
  for (size_t t = 0; t < num_tables; ++t) {
    const size_t n = table_offset_[t + 1] - table_offset_[t];
    if (n > 0) std::memcpy(grads.tables[t], host_grads_.data() + table_offset_[t], 4 * n);
  }
  return absl::OkStatus();
}

void ModelBase::ReportReady(uint32_t table) {
  if (reporting_ == nullptr || table >= reported_.size() || reported_[table]) return;
  if (registry_.tables()[table].kind != TableKind::kDense) return;
  reported_[table] = 1;
  reporting_->on_ready(table);
}

absl::StatusOr<StepOutput> ModelBase::TrainStep(const Batch& batch, const BatchPlan& plan,
                                                const ParamRefs& params, GradRefs* grads) {
  IndexTables();
  if (grads == nullptr) return absl::InvalidArgumentError("TrainStep needs gradient outputs");
  PS_RETURN_IF_ERROR(Validate(batch, plan, params, grads));
  PS_RETURN_IF_ERROR(Stage(batch, plan, params, grads));
  const int rows = batch.size;
  PS_RETURN_IF_ERROR(ZeroSparseGrads());
  // Gradient-ready reports: only where the gradients are in the caller's
  // memory as soon as they are computed (the CPU); a GPU step reports
  // everything after copying the gradients back.
  reporting_ = grads->on_ready ? grads : nullptr;
  reported_.assign(registry_.tables().size(), 0);
  double loss = 0.0;
  ++train_steps_;
  StepOutput out;
  const int num_heads = static_cast<int>(heads_.size());
  if (!OneBceHead()) {
    out.head_loss_sum.assign(num_heads, 0.0);
    out.head_rows.assign(num_heads, 0);
  }
  const uint64_t dropout_seed = nn::DropoutMix(
      options_.seed ^ nn::DropoutMix(options_.dropout_stream ^ nn::DropoutMix(train_steps_)));
  for (int begin = 0; begin < rows; begin += chunk_rows_) {
    const int n = std::min(chunk_rows_, rows - begin);
    SliceStep(begin, n);
    chunk_.dropout = nn::DropoutRun{options_.dropout, dropout_seed, begin};
    const bool last_chunk = begin + n >= rows;
    chunk_.grad_ready = reporting_ != nullptr && last_chunk && device_->host_memory() ? &ready_fn_
                                                                                       : nullptr;
    const size_t at = static_cast<size_t>(begin) * num_heads;
    nn::MatrixView logits(logits_.as() + at, n, num_heads);
    nn::MatrixView dlogits(dlogits_.as() + at, n, num_heads);
    PS_RETURN_IF_ERROR(Forward(chunk_, logits));
    if (OneBceHead()) {
      PS_ASSIGN_OR_RETURN(double chunk_loss,
                          device_->SigmoidBceLoss(logits.data, chunk_.labels, n, dlogits.data));
      loss += chunk_loss;
    } else if (device_->host_memory()) {
      loss += HeadLosses(batch, begin, logits, dlogits, &out);
    } else {
      PS_ASSIGN_OR_RETURN(double chunk_loss, DeviceHeadLosses(batch, begin, logits, dlogits, &out));
      loss += chunk_loss;
    }
    PS_RETURN_IF_ERROR(Backward(chunk_, logits, dlogits, /*accumulate=*/begin > 0));
  }
  PS_RETURN_IF_ERROR(ExportGrads(*grads));
  if (reporting_ != nullptr) {
    for (const TableSpec& t : registry_.tables()) {
      if (t.kind == TableKind::kDense) ReportReady(t.id);
    }
    reporting_ = nullptr;
  }
  out.loss_sum = loss;
  out.num_samples = rows;
  if (options_.step_probs) {
    // The first head's, from a copy of the logits on the host.
    out.probs.resize(rows);
    host_logits_.resize(static_cast<size_t>(rows) * num_heads);
    PS_RETURN_IF_ERROR(device_->CopyToHost(host_logits_.data(), logits_.as(),
                                           sizeof(float) * rows * num_heads));
    for (int r = 0; r < rows; ++r) {
      const float z = host_logits_.data()[static_cast<size_t>(r) * num_heads];
      out.probs[r] = heads_[0].regression ? z : nn::SigmoidOf(z);
    }
    if (num_heads > 1) {
      out.head_probs.assign(host_logits_.data(),
                            host_logits_.data() + static_cast<size_t>(rows) * num_heads);
      HeadProbabilities(out.head_probs);
    }
  }
  return out;
}

double ModelBase::HeadLosses(const Batch& batch, int begin, nn::ConstMatrixView logits,
                             nn::MatrixView dlogits, StepOutput* out) const {
  double total = 0;
  // In the heads' order: a conditioned head adds to the gradient of the
  // earlier head it names, which is already written.
  for (size_t h = 0; h < heads_.size(); ++h) {
    const ModelHead& head = heads_[h];
    double sum = 0;
    int64_t labelled = 0;
    for (int r = 0; r < logits.rows; ++r) {
      const float y = HeadLabelOf(batch, heads_, h, begin + r);
      const float z = logits.row(r)[h];
      float& d = dlogits.row(r)[h];
      if (std::isnan(y)) {  // no label: no loss
        d = 0.0f;
        continue;
      }
      ++labelled;
      if (head.times >= 0) {
        // p = s_a s_b (s = sigmoid of this logit a and of the named head's
        // b); BCE of p: dL/da = (p - y)(1 - s_a)/(1 - p), dL/db likewise.
        const float zb = logits.row(r)[head.times];
        const double sa = nn::SigmoidOf(z), sb = nn::SigmoidOf(zb);
        const double p = std::clamp(sa * sb, 1e-12, 1.0 - 1e-7);
        sum += -(y * std::log(p) + (1.0 - y) * std::log1p(-p));
        const double g = head.weight * (p - y) / (1.0 - p);
        d = static_cast<float>(g * (1.0 - sa));
        dlogits.row(r)[head.times] += static_cast<float>(g * (1.0 - sb));
      } else if (head.regression) {
        const float e = z - y;
        sum += static_cast<double>(e) * e;
        d = head.weight * 2.0f * e;
      } else {
        sum += nn::BceFromLogit(z, y);
        d = head.weight * (nn::SigmoidOf(z) - y);
      }
    }
    out->head_loss_sum[h] += sum;
    out->head_rows[h] += labelled;
    total += head.weight * sum;
  }
  return total;
}

absl::StatusOr<double> ModelBase::DeviceHeadLosses(const Batch& batch, int begin,
                                                   nn::ConstMatrixView logits,
                                                   nn::MatrixView dlogits, StepOutput* out) {
  const size_t n = static_cast<size_t>(logits.rows) * logits.cols;
  host_logits_.resize(2 * n);
  PS_RETURN_IF_ERROR(device_->CopyToHost(host_logits_.data(), logits.data, sizeof(float) * n));
  const nn::MatrixView host_d(host_logits_.data() + n, logits.rows, logits.cols);
  const double loss = HeadLosses(
      batch, begin, nn::ConstMatrixView(host_logits_.data(), logits.rows, logits.cols), host_d, out);
  PS_RETURN_IF_ERROR(device_->CopyToDevice(dlogits.data, host_d.data, sizeof(float) * n));
  return loss;
}

absl::Status ModelBase::HeadOutputs(nn::ConstMatrixView logits, float* probs) {
  const size_t n = static_cast<size_t>(logits.rows) * logits.cols;
  PS_RETURN_IF_ERROR(device_->CopyToHost(probs, logits.data, sizeof(float) * n));
  HeadProbabilities(std::span<float>(probs, n));
  return absl::OkStatus();
}

void ModelBase::HeadProbabilities(std::span<float> values) const {
  const size_t num_heads = heads_.size();
  for (size_t i = 0; i < values.size(); ++i) {
    const ModelHead& head = heads_[i % num_heads];
    if (head.regression) continue;
    values[i] = nn::SigmoidOf(values[i]);
    // The named head is earlier in the row: already its probability.
    if (head.times >= 0) values[i] *= values[i - i % num_heads + head.times];
  }
}

absl::Status ModelBase::Predict(const Batch& batch, const BatchPlan& plan,
                                const ParamRefs& params, std::span<float> probs) {
  IndexTables();
  PS_RETURN_IF_ERROR(Validate(batch, plan, params, nullptr));
  const int num_heads = static_cast<int>(heads_.size());
  if (probs.size() < static_cast<size_t>(batch.size) * num_heads) {
    return absl::InvalidArgumentError(absl::StrCat("probs holds ", probs.size(),
                                                   " values for a batch of ", batch.size,
                                                   " rows and ", num_heads, " head(s)"));
  }
  PS_RETURN_IF_ERROR(Stage(batch, plan, params, nullptr));
  const int rows = batch.size;
  nn::MatrixView logits(logits_.as(), rows, num_heads);
  for (int begin = 0; begin < rows; begin += chunk_rows_) {
    const int n = std::min(chunk_rows_, rows - begin);
    SliceStep(begin, n);
    PS_RETURN_IF_ERROR(Forward(chunk_, logits.Rows(begin, n)));
  }
  if (!OneBceHead()) return HeadOutputs(logits, probs.data());
  if (device_->host_memory()) return device_->Sigmoid(logits.data, rows, probs.data());
  PS_RETURN_IF_ERROR(device_->Sigmoid(logits.data, rows, dlogits_.as()));
  return device_->CopyToHost(probs.data(), dlogits_.as(), sizeof(float) * rows);
}

}  // namespace pstrain::worker
