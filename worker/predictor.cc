#include "worker/predictor.h"

#include <cstdio>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/optim/initializer.h"
#include "worker/data/reader.h"
#include "worker/model_io.h"

namespace pstrain::worker {
namespace {

// A sparse table loaded for lookups.
struct SparseLookupTable {
  const TableValues* values = nullptr;
  absl::flat_hash_map<uint64_t, uint32_t> row_of;
  std::unique_ptr<optim::Initializer> init;
};

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

}  // namespace

absl::StatusOr<PredictResult> PredictFile(const PredictOptions& options) {
  absl::Time start = absl::Now();
  PS_ASSIGN_OR_RETURN(SavedModel saved, ReadModel(options.model_dir));
  saved.model.device = "cpu";
  PS_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(saved.model));
  PS_RETURN_IF_ERROR(CheckSameTables(model->tables(), saved));

  std::vector<SparseLookupTable> sparse(model->sparse_tables().size());
  for (size_t k = 0; k < sparse.size(); ++k) {
    const TableValues& t = saved.tables[model->sparse_tables()[k]];
    sparse[k].values = &t;
    sparse[k].row_of.reserve(t.ids.size());
    for (size_t i = 0; i < t.ids.size(); ++i) sparse[k].row_of[t.ids[i]] = static_cast<uint32_t>(i);
    // The rows of ids never trained read as on the servers: zeros, or what
    // a server would have created.
    InitializerConfig init = model->tables()[t.spec.id].init;
    PS_ASSIGN_OR_RETURN(auto initializer, optim::Initializer::Create(init, t.spec.id));
    sparse[k].init = std::make_unique<optim::Initializer>(std::move(initializer));
  }

  ReaderOptions ro;
  ro.patterns = options.data;
  ro.schema = saved.schema;
  ro.batch_size = options.batch_size;
  ro.epochs = 1;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(ro));
  std::unique_ptr<AtomicFileWriter> out;
  if (!options.out.empty()) {
    PS_ASSIGN_OR_RETURN(out, AtomicFileWriter::Open(options.out));
  }

  ParamRefs params;
  params.tables.assign(model->tables().size(), nullptr);
  for (const TableValues& t : saved.tables) {
    if (t.spec.kind == TableKind::kDense) params.tables[t.spec.id] = t.dense.data();
  }
  BatchPlan plan;
  std::vector<std::vector<float>> rows(sparse.size());
  std::vector<float> probs, all_probs, all_labels;
  std::string text;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> batch, reader->Next());
    if (!batch) break;
    model->Plan(*batch, &plan);
    for (size_t k = 0; k < sparse.size(); ++k) {
      const SparseLookupTable& s = sparse[k];
      size_t dim = s.values->spec.dim;
      const auto& ids = plan.lookups[k].unique_ids;
      rows[k].resize(ids.size() * dim);
      for (size_t i = 0; i < ids.size(); ++i) {
        float* dst = rows[k].data() + i * dim;
        auto it = s.row_of.find(ids[i]);
        if (it != s.row_of.end()) {
          std::copy_n(s.values->rows.data() + size_t{it->second} * dim, dim, dst);
        } else if (s.values->missing_as_zeros) {
          std::fill_n(dst, dim, 0.0f);
        } else {
          s.init->FillRow(ids[i], dst, dim);
        }
      }
      params.tables[model->sparse_tables()[k]] = rows[k].data();
    }
    probs.resize(batch->size);
    PS_RETURN_IF_ERROR(model->Predict(*batch, plan, params, probs));
    all_probs.insert(all_probs.end(), probs.begin(), probs.end());
    all_labels.insert(all_labels.end(), batch->labels.begin(), batch->labels.end());
    if (out) {
      text.clear();
      for (float p : probs) absl::StrAppend(&text, absl::StrFormat("%.6f\n", p));
      PS_RETURN_IF_ERROR(out->Append(text.data(), text.size()));
    }
  }
  if (out) PS_RETURN_IF_ERROR(out->Commit());
  PredictResult r;
  r.rows = static_cast<int64_t>(all_probs.size());
  r.metrics = ComputeBinaryMetrics(all_probs, all_labels);
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return r;
}

}  // namespace pstrain::worker
