#include "serve/predictor.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"
#include "data/bad_line.h"
#include "data/batch_builder.h"
#include "data/data_check.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "data/parquet_rows.h"
#include "data/parser.h"
#include "model/models/head_eval.h"
#include "serve/scorer.h"

namespace pstrain::worker {
namespace {

constexpr size_t kReadBuffer = size_t{1} << 20;

// A reason as the output's second column: one line, no tab.
std::string OneField(absl::string_view reason) {
  std::string out(reason);
  for (char& c : out) {
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

// Scores the rows of the lines read since the last flush and writes one
// output line per line read, in order.
class AlignedScorer {
 public:
  AlignedScorer(const LoadedModel& model, ScoreScratch* scratch, AtomicFileWriter* out,
                int batch_size)
      : model_(model),
        scratch_(scratch),
        out_(out),
        batch_size_(batch_size),
        builder_(model.schema().num_dense, model.schema().num_sparse, batch_size,
                 static_cast<int>(model.schema().extra_labels.size())) {}

  absl::Status AddRow(const ParsedRow& row) {
    if (!builder_.Append(row)) {  // the batch's limits: score what is there first
      PS_RETURN_IF_ERROR(Flush());
      if (!builder_.Append(row)) return absl::ResourceExhaustedError("a row exceeds one batch");
    }
    lines_.emplace_back();
    return MaybeFlush();
  }

  absl::Status AddUnscored(absl::string_view reason) {
    lines_.push_back(OneField(reason));
    return MaybeFlush();
  }

  absl::Status Flush() {
    if (!builder_.empty()) {
      std::shared_ptr<const Batch> batch = builder_.Finish();
      PS_RETURN_IF_ERROR(model_.Score(*batch, scratch_, &probs_));
      all_probs_.insert(all_probs_.end(), probs_.begin(), probs_.end());
      AppendHeadLabels(*batch, model_.heads(), &all_labels_);
    } else {
      probs_.clear();
    }
    if (out_ != nullptr) {
      // One column per head; an unscored line's are empty, then its reason.
      text_.clear();
      const size_t heads = model_.heads().size();
      size_t next = 0;
      for (const std::optional<std::string>& reason : lines_) {
        if (reason.has_value()) {
          absl::StrAppend(&text_, std::string(heads, '\t'), *reason, "\n");
          continue;
        }
        for (size_t h = 0; h < heads; ++h) {
          absl::StrAppend(&text_, absl::StrFormat(h + 1 < heads ? "%.6f\t" : "%.6f\n", probs_[next++]));
        }
      }
      PS_RETURN_IF_ERROR(out_->Append(text_.data(), text_.size()));
    }
    lines_.clear();
    return absl::OkStatus();
  }

  const std::vector<float>& probs() const { return all_probs_; }
  const std::vector<float>& labels() const { return all_labels_; }

 private:
  // Memory stays bounded however many lines in a row fail.
  absl::Status MaybeFlush() {
    if (builder_.size() >= batch_size_ || lines_.size() >= 4 * static_cast<size_t>(batch_size_)) {
      return Flush();
    }
    return absl::OkStatus();
  }

  const LoadedModel& model_;
  ScoreScratch* scratch_;
  AtomicFileWriter* out_;
  const int batch_size_;
  BatchBuilder builder_;
  // One per line since the last flush: nullopt for a row of the batch, or
  // the reason it was not scored.
  std::vector<std::optional<std::string>> lines_;
  std::vector<float> probs_, all_probs_, all_labels_;
  std::string text_;
};

// PredictLines for a Parquet file: one output line per row, in file order.
absl::Status PredictParquetRows(const InputFile& file, const Schema& schema,
                                const PredictOptions& options, AlignedScorer* scorer,
                                PredictResult* result) {
  if (!schema.custom || schema.column_names.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file.path, " is a Parquet file, and the model's schema names no columns to find in it"));
  }
  ParquetRows rows(schema);
  PS_RETURN_IF_ERROR(rows.Open(file.path, 0, file.size));
  ParsedRow row;
  std::string why;
  while (true) {
    PS_ASSIGN_OR_RETURN(bool more, rows.Next(&row, &why));
    if (!more) return absl::OkStatus();
    if (why.empty()) {
      PS_RETURN_IF_ERROR(scorer->AddRow(row));
      continue;
    }
    const std::string message = absl::StrCat(rows.Where(), ": ", why);
    if (options.on_bad_line == OnBadLine::kFail) return absl::InvalidArgumentError(message);
    if (result->bad_lines++ == 0) result->first_bad = message;
    PS_RETURN_IF_ERROR(scorer->AddUnscored(why));
  }
}

absl::Status PredictLines(const InputFile& file, const Parser& parser,
                          const PredictOptions& options, AlignedScorer* scorer,
                          PredictResult* result) {
  const Schema& schema = parser.schema();
  LineReader reader(kReadBuffer, schema.max_line_bytes);
  PS_RETURN_IF_ERROR(reader.Open(file, 0, file.size));
  ParsedRow row;
  std::vector<std::string> partition;  // the file's partition columns' values
  if (!schema.partition_columns.empty()) {
    PS_ASSIGN_OR_RETURN(partition, PartitionValues(file.path, schema.partition_columns));
    row.partition = &partition;
  }
  LineReader::Line line;
  while (true) {
    PS_ASSIGN_OR_RETURN(bool more, reader.Next(&line));
    if (!more) return absl::OkStatus();
    // The reader starts at the file's first byte: index + 1 is the line number.
    const std::string where = absl::StrCat(file.path, ":", line.index + 1);
    if (line.index == 0 && schema.header) {
      absl::Status st = line.overlong ? absl::InvalidArgumentError("the header is too long")
                                      : parser.CheckHeader(line.text);
      if (!st.ok()) return absl::InvalidArgumentError(BadLineMessage(where, st.message(), line.text));
      continue;  // not a data line: no output line
    }
    if (!line.overlong && (line.text.empty() || line.text == "\r")) {
      ++result->blank_lines;
      PS_RETURN_IF_ERROR(scorer->AddUnscored("blank line"));
      continue;
    }
    absl::Status st = line.overlong
                          ? absl::InvalidArgumentError(absl::StrCat(
                                "line longer than max_line_bytes ", schema.max_line_bytes))
                          : parser.Parse(line.text, &row);
    if (st.ok()) {
      PS_RETURN_IF_ERROR(scorer->AddRow(row));
      continue;
    }
    const std::string message = BadLineMessage(where, st.message(), line.text);
    if (options.on_bad_line == OnBadLine::kFail) return absl::InvalidArgumentError(message);
    if (result->bad_lines++ == 0) result->first_bad = message;
    PS_RETURN_IF_ERROR(scorer->AddUnscored(st.message()));
  }
}

}  // namespace

absl::StatusOr<PredictResult> PredictFile(const PredictOptions& options) {
  absl::Time start = absl::Now();
  if (options.batch_size < 1) return absl::InvalidArgumentError("batch_size must be >= 1");
  PS_ASSIGN_OR_RETURN(std::shared_ptr<const LoadedModel> model, LoadedModel::Load(options.model_dir));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ScoreScratch> scratch, model->AcquireScratch());
  PS_ASSIGN_OR_RETURN(std::unique_ptr<const Parser> parser, CreateParser(model->schema()));
  // Input in another layout (a separator, a header) fails before any output.
  DataCheckOptions check;
  check.flag = "--data";
  PS_RETURN_IF_ERROR(CheckDataFiles(options.data, model->schema(), check));
  PS_ASSIGN_OR_RETURN(std::vector<InputFile> files, ExpandFilePatterns(options.data));
  std::unique_ptr<AtomicFileWriter> out;
  if (!options.out.empty()) {
    PS_ASSIGN_OR_RETURN(out, AtomicFileWriter::Open(options.out));
  }
  AlignedScorer scorer(*model, scratch.get(), out.get(), options.batch_size);
  PredictResult r;
  for (const InputFile& f : files) {
    PS_RETURN_IF_ERROR(f.parquet ? PredictParquetRows(f, model->schema(), options, &scorer, &r)
                                 : PredictLines(f, *parser, options, &scorer, &r));
  }
  PS_RETURN_IF_ERROR(scorer.Flush());
  if (out) PS_RETURN_IF_ERROR(out->Commit());
  const std::vector<ModelHead>& heads = model->heads();
  r.rows = static_cast<int64_t>(scorer.probs().size() / heads.size());
  if (OneLabelHead(heads)) {
    r.metrics = ComputeBinaryMetrics(scorer.probs(), scorer.labels());
  } else {
    r.heads = EvaluateHeads(heads, scorer.probs(), scorer.labels());
    r.metrics = r.heads[0].binary;
  }
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  return r;
}

}  // namespace pstrain::worker
