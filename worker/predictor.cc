#include "worker/predictor.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"
#include "worker/data/reader.h"
#include "worker/serve/scorer.h"

namespace pstrain::worker {

absl::StatusOr<PredictResult> PredictFile(const PredictOptions& options) {
  absl::Time start = absl::Now();
  PS_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedModel> model, LoadedModel::Load(options.model_dir));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ScoreScratch> scratch, model->AcquireScratch());

  ReaderOptions ro;
  ro.patterns = options.data;
  ro.schema = model->schema();
  ro.batch_size = options.batch_size;
  ro.epochs = 1;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<DataReader> reader, DataReader::Open(ro));
  std::unique_ptr<AtomicFileWriter> out;
  if (!options.out.empty()) {
    PS_ASSIGN_OR_RETURN(out, AtomicFileWriter::Open(options.out));
  }

  std::vector<float> probs, all_probs, all_labels;
  std::string text;
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const Batch> batch, reader->Next());
    if (!batch) break;
    PS_RETURN_IF_ERROR(model->Score(*batch, scratch.get(), &probs));
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
