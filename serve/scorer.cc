#include "serve/scorer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/checksum.h"
#include "common/file_util.h"
#include "common/status.h"
#include "serve/model_versions.h"

namespace pstrain::worker {
namespace {

// Scratch objects kept for reuse: about one per serving thread.
constexpr size_t kMaxPooledScratch = 64;

}  // namespace

absl::Status CheckSameTables(const std::vector<TableSpec>& model, const SavedModel& saved) {
  if (model.size() != saved.tables.size()) {
    return absl::FailedPreconditionError(absl::StrCat("the model has ", model.size(),
                                                      " tables, the export ", saved.tables.size()));
  }
  for (size_t i = 0; i < model.size(); ++i) {
    const TableSpec& a = model[i];
    const TableSpec& b = saved.tables[i].spec;
    if (a.name != b.name || a.kind != b.kind || a.size != b.size || a.dim != b.dim) {
      return absl::FailedPreconditionError(
          absl::StrCat("table ", i, " is ", a.name, " in the model but ", b.name, " in the export"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::Load(const std::string& dir) {
  if (IsVersionedExport(dir)) {
    PS_ASSIGN_OR_RETURN(uint64_t seq, ReadLatest(dir));
    PS_ASSIGN_OR_RETURN(SavedModel saved, ReadVersionedModel(dir, seq));
    return FromSaved(std::move(saved), VersionName(seq));
  }
  // The manifest's checksum names the version; reading it again after the
  // tables catches a model replaced while it was read.
  const std::string manifest = dir + "/model.json";
  PS_ASSIGN_OR_RETURN(std::string before, ReadFileToString(manifest));
  PS_ASSIGN_OR_RETURN(SavedModel saved, ReadModel(dir));
  PS_ASSIGN_OR_RETURN(std::string after, ReadFileToString(manifest));
  if (after != before) {
    return absl::UnavailableError(absl::StrCat(dir, " was replaced while it was read"));
  }
  Checksum64 sum;
  sum.Update(before.data(), before.size());
  return FromSaved(std::move(saved), absl::StrFormat("%016x", sum.Digest()));
}

absl::StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::FromSaved(SavedModel saved,
                                                                   std::string version) {
  std::shared_ptr<LoadedModel> m(new LoadedModel());
  m->saved_ = std::move(saved);
  m->saved_.model.device = "cpu";
  m->version_ = std::move(version);
  PS_RETURN_IF_ERROR(m->Build());
  return m;
}

absl::StatusOr<std::shared_ptr<LoadedModel>> LoadedModel::Clone() const {
  SavedModel copy;
  copy.model = saved_.model;
  copy.schema = saved_.schema;
  copy.step = saved_.step;
  copy.chosen = saved_.chosen;
  copy.exported = saved_.exported;
  copy.tables.reserve(saved_.tables.size());
  for (const TableValues& t : saved_.tables) {
    TableValues c;
    c.spec = t.spec;
    c.missing_as_zeros = t.missing_as_zeros;
    c.dense = t.dense;
    copy.tables.push_back(std::move(c));
  }
  // Sparse tables: the live rows only (a removed id leaves its old row).
  for (size_t k = 0; k < sparse_.size(); ++k) {
    const SparseTable& s = sparse_[k];
    TableValues& c = copy.tables[sparse_ids_[k]];
    const size_t dim = s.values->spec.dim;
    c.ids.reserve(s.row_of.size());
    c.rows.reserve(s.row_of.size() * dim);
    for (const auto& [id, row] : s.row_of) {
      c.ids.push_back(id);
      c.rows.insert(c.rows.end(), s.values->rows.begin() + size_t{row} * dim,
                    s.values->rows.begin() + (size_t{row} + 1) * dim);
    }
  }
  return FromSaved(std::move(copy), version_);
}

absl::Status LoadedModel::ApplyDelta(const SavedModel& delta) {
  const ExportInfo& was = saved_.exported;
  if (!delta.exported.delta || delta.exported.seq != was.seq + 1 ||
      delta.exported.base != was.base) {
    return absl::FailedPreconditionError(
        absl::StrCat(VersionName(delta.exported.seq), " is not a delta on top of ",
                     VersionName(was.seq), " (base ", VersionName(was.base), ")"));
  }
  PS_RETURN_IF_ERROR(CheckSameTables(
      [&] {
        std::vector<TableSpec> specs;
        for (const TableValues& t : saved_.tables) specs.push_back(t.spec);
        return specs;
      }(),
      delta));
  for (const TableValues& d : delta.tables) {
    const bool sparse = d.spec.kind == TableKind::kSparse;
    if (sparse ? d.rows.size() != d.ids.size() * d.spec.dim : d.dense.size() != d.spec.size) {
      return absl::FailedPreconditionError(
          absl::StrCat(VersionName(delta.exported.seq), ": table ", d.spec.name, " has bad sizes"));
    }
  }
  // Checked: now in place. Dense values are copied into the same storage
  // (the scorer's pointers stay valid).
  for (const TableValues& d : delta.tables) {
    if (d.spec.kind == TableKind::kDense) {
      std::copy(d.dense.begin(), d.dense.end(), saved_.tables[d.spec.id].dense.begin());
    }
  }
  for (size_t k = 0; k < sparse_.size(); ++k) {
    SparseTable& s = sparse_[k];
    const TableValues& d = delta.tables[sparse_ids_[k]];
    TableValues& t = *s.values;
    const size_t dim = t.spec.dim;
    for (size_t i = 0; i < d.ids.size(); ++i) {
      auto [it, fresh] = s.row_of.try_emplace(d.ids[i], static_cast<uint32_t>(t.ids.size()));
      if (fresh) {
        t.ids.push_back(d.ids[i]);
        t.rows.resize(t.rows.size() + dim);
      }
      std::copy_n(d.rows.data() + i * dim, dim, t.rows.data() + size_t{it->second} * dim);
    }
    for (uint64_t id : d.removed) s.row_of.erase(id);  // its old row stays unused
  }
  saved_.step = delta.step;
  saved_.exported = delta.exported;
  version_ = VersionName(delta.exported.seq);
  return absl::OkStatus();
}

absl::Status LoadedModel::Build() {
  // A model instance checks the export's shapes and names the sparse tables.
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(saved_.model));
  PS_RETURN_IF_ERROR(CheckSameTables(model->tables(), saved_));
  sparse_ids_ = model->sparse_tables();
  heads_ = model->heads();
  dense_.assign(saved_.tables.size(), nullptr);
  for (const TableValues& t : saved_.tables) {
    if (t.spec.kind == TableKind::kDense) dense_[t.spec.id] = t.dense.data();
  }
  sparse_.resize(sparse_ids_.size());
  for (size_t k = 0; k < sparse_.size(); ++k) {
    TableValues& t = saved_.tables[sparse_ids_[k]];
    SparseTable& s = sparse_[k];
    s.values = &t;
    s.row_of.reserve(t.ids.size());
    for (size_t i = 0; i < t.ids.size(); ++i) s.row_of[t.ids[i]] = static_cast<uint32_t>(i);
    PS_ASSIGN_OR_RETURN(auto initializer,
                        optim::Initializer::Create(model->tables()[t.spec.id].init, t.spec.id));
    s.init = std::make_unique<optim::Initializer>(std::move(initializer));
  }
  auto first = std::make_unique<ScoreScratch>();
  first->model = std::move(model);
  ReleaseScratch(std::move(first));
  return absl::OkStatus();
}

uint64_t LoadedModel::sparse_rows() const {
  uint64_t rows = 0;
  for (const SparseTable& s : sparse_) rows += s.row_of.size();
  return rows;
}

absl::StatusOr<std::unique_ptr<ScoreScratch>> LoadedModel::AcquireScratch() const {
  {
    absl::MutexLock lock(&pool_mu_);
    if (!pool_.empty()) {
      std::unique_ptr<ScoreScratch> s = std::move(pool_.back());
      pool_.pop_back();
      return s;
    }
  }
  auto s = std::make_unique<ScoreScratch>();
  PS_ASSIGN_OR_RETURN(s->model, CreateModel(saved_.model));
  return s;
}

void LoadedModel::ReleaseScratch(std::unique_ptr<ScoreScratch> scratch) const {
  absl::MutexLock lock(&pool_mu_);
  if (pool_.size() < kMaxPooledScratch) pool_.push_back(std::move(scratch));
}

absl::Status LoadedModel::Score(const Batch& batch, ScoreScratch* scratch,
                                std::vector<float>* probs) const {
  if (batch.num_dense != saved_.model.num_dense || batch.num_sparse != saved_.model.num_sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rows of ", batch.num_dense, " dense and ", batch.num_sparse, " categorical columns; the model ",
        "reads ", saved_.model.num_dense, " and ", saved_.model.num_sparse));
  }
  Model& model = *scratch->model;
  model.Plan(batch, &scratch->plan);
  scratch->params.tables = dense_;
  scratch->rows.resize(sparse_.size());
  for (size_t k = 0; k < sparse_.size(); ++k) {
    const SparseTable& s = sparse_[k];
    const size_t dim = s.values->spec.dim;
    const std::vector<uint64_t>& ids = scratch->plan.lookups[k].unique_ids;
    std::vector<float>& rows = scratch->rows[k];
    rows.resize(ids.size() * dim);
    for (size_t i = 0; i < ids.size(); ++i) {
      float* dst = rows.data() + i * dim;
      auto it = s.row_of.find(ids[i]);
      if (it != s.row_of.end()) {
        std::copy_n(s.values->rows.data() + size_t{it->second} * dim, dim, dst);
      } else if (s.values->missing_as_zeros) {
        std::fill_n(dst, dim, 0.0f);
      } else {
        s.init->FillRow(ids[i], dst, dim);  // what a server creates for it
      }
    }
    scratch->params.tables[sparse_ids_[k]] = rows.data();
  }
  probs->resize(static_cast<size_t>(batch.size) * heads_.size());
  return model.Predict(batch, scratch->plan, scratch->params, *probs);
}

}  // namespace pstrain::worker
