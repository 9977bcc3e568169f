// The data flags of a worker: where the rows come from (--train_data, a
// --train_stream of partitions, --eval_data) and their layout (the Criteo
// one from --dense_fields, --sparse_fields, --field_sep, or a --schema
// file's).
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "data/partition_stream.h"
#include "data/schema_file.h"
#include "worker/flags/worker_flags.h"

// The model's and the run's flags that the layout follows (worker_flags.cc).
ABSL_DECLARE_FLAG(int, embedding_dim);
ABSL_DECLARE_FLAG(std::string, bottom_mlp);
ABSL_DECLARE_FLAG(int, epochs);

ABSL_FLAG(uint64_t, hash_buckets, 0, "Fold ids into this many rows per field (0: unbounded ids).");
ABSL_FLAG(std::string, train_data, "",
          "Training data: comma-separated paths or globs of delimited text files, plain, gzip or "
          "zstd; in the Criteo layout (label, --dense_fields, --sparse_fields; tab-separated by "
          "default), or in the layout --schema describes.");
ABSL_FLAG(std::string, train_stream, "",
          "Train on a stream of partitions instead of --train_data: folders under this one "
          "holding a _SUCCESS file (e.g. DIR/2026-12-01/13/part-0.tsv.gz + _SUCCESS), taken in "
          "name order, each once, waiting for the next (polling); every row is scored before it "
          "is trained on (progressive AUC per partition in --metrics_out).");
ABSL_FLAG(std::string, stream_start, "", "--train_stream: the first partition, by name (>=).");
ABSL_FLAG(std::string, stream_end, "",
          "--train_stream: the last partition, by name (<=); empty: run until stopped or idle.");
ABSL_FLAG(double, stream_poll_secs, 1, "--train_stream: seconds between looks for a new partition.");
ABSL_FLAG(double, stream_idle_secs, 0,
          "--train_stream: end the stream when no new partition completes for this long "
          "(0: wait until --stream_end or until stopped).");
ABSL_FLAG(std::string, eval_data, "",
          "Held-out data evaluated at the end (and every --eval_every_steps or "
          "--eval_every_epochs), in the layout of --train_data.");
ABSL_FLAG(std::string, eval_meta, "", "Generator meta file of the eval data (adds the oracle AUC to the summary).");
ABSL_FLAG(int, dense_fields, 13, "Integer (dense) columns after the label.");
ABSL_FLAG(int, sparse_fields, 26, "Categorical columns after the dense ones.");
ABSL_FLAG(std::string, multi_hot_sep, "", "Separator of several tokens in one categorical field (empty: one token).");
ABSL_FLAG(std::string, schema, "",
          "A JSON file describing the columns of your data (separator, header, label column or "
          "threshold, dense columns and their transforms, categorical columns with their hash "
          "sizes, multi-hot separators and pooling, columns to ignore): docs/schema.md in the repository. "
          "Empty: the Criteo layout (--format=criteo): label, --dense_fields integers, "
          "--sparse_fields categorical tokens.");
ABSL_FLAG(std::string, format, "criteo",
          "criteo: label, --dense_fields integer columns (each log(1 + max(x, 0))), "
          "--sparse_fields categorical columns, --field_sep between them. custom: the columns "
          "--schema describes (set by --schema).");
ABSL_FLAG(std::string, field_sep, "tab",
          "Criteo layout: the column separator: tab, comma, or any one character (a --schema "
          "file gives its own).");
ABSL_FLAG(bool, header, false,
          "Criteo layout: the first line of every file is a header line and is skipped (a "
          "--schema file gives its own).");
ABSL_FLAG(int64_t, max_line_bytes, 1 << 20,
          "Longer lines are bad lines (skipped, counted against --max_bad_lines_fraction).");
ABSL_FLAG(int, reader_threads, 1,
          "Threads that read, decompress and parse the training and evaluation data: 1, the "
          "reader's own thread; N > 1, N more, each on a work unit at a time (~8 MiB of a "
          "text file, a Parquet row group, a compressed file whole). The batches are the same "
          "whatever N.");
namespace pstrain::worker {
namespace {

std::vector<std::string> SplitList(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipEmpty());
}

absl::StatusOr<char> SeparatorFlag(const std::string& text) {
  std::string lower = absl::AsciiStrToLower(text);
  if (lower == "tab" || text == "\\t" || text == "\t") return '\t';
  if (lower == "comma") return ',';
  if (lower == "space") return ' ';
  if (text.size() != 1 || text[0] == '\n' || text[0] == '\r' || text[0] == '"') {
    return absl::InvalidArgumentError(
        absl::StrCat("--field_sep=", text, ": not one character (or tab, comma, space)"));
  }
  return text[0];
}

// The layout of the data: the Criteo one from the flags, or a schema file's.
absl::Status SchemaFromFlags(const std::vector<std::string>& train_data, Schema* schema,
                             ModelOptions* m) {
  const std::string path = absl::GetFlag(FLAGS_schema);
  const std::string format = absl::GetFlag(FLAGS_format);
  const int64_t max_line = absl::GetFlag(FLAGS_max_line_bytes);
  if (max_line < 16 || max_line > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("--max_line_bytes must be in [16, 2^30]");
  }
  if (format != "criteo" && format != "custom") {
    return absl::InvalidArgumentError("--format must be criteo or custom (with --schema), not '" +
                                      format + "'");
  }
  if (path.empty()) {
    if (format == "custom") return absl::InvalidArgumentError("--format=custom needs --schema=FILE");
    schema->num_dense = m->num_dense;
    schema->num_sparse = m->num_sparse;
    if (m->num_dense < 0 || m->num_sparse < 0) {
      return absl::InvalidArgumentError("--dense_fields and --sparse_fields must be >= 0");
    }
    schema->hash_buckets = absl::GetFlag(FLAGS_hash_buckets);
    std::string sep = absl::GetFlag(FLAGS_multi_hot_sep);
    if (sep.size() > 1) return absl::InvalidArgumentError("--multi_hot_sep must be one character");
    schema->multi_hot_sep = sep.empty() ? 0 : sep[0];
    PS_ASSIGN_OR_RETURN(schema->field_sep, SeparatorFlag(absl::GetFlag(FLAGS_field_sep)));
    schema->header = absl::GetFlag(FLAGS_header);
    schema->max_line_bytes = static_cast<size_t>(max_line);
    m->field_rows.assign(static_cast<size_t>(m->num_sparse), schema->hash_buckets);
    return ValidateSchema(*schema);
  }
  // A schema file says what the layout flags would.
  const auto set = [](const auto& flag, const auto& fallback) { return flag != fallback; };
  std::vector<std::string> clash;
  if (set(absl::GetFlag(FLAGS_field_sep), std::string("tab"))) clash.push_back("--field_sep");
  if (absl::GetFlag(FLAGS_header)) clash.push_back("--header");
  if (!absl::GetFlag(FLAGS_multi_hot_sep).empty()) clash.push_back("--multi_hot_sep");
  if (set(m->num_dense, 13) || set(m->num_sparse, 26)) clash.push_back("--dense_fields/--sparse_fields");
  if (!clash.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(clash, ", "), " and --schema=",
                                                   path, ": the schema file gives the layout"));
  }
  PS_ASSIGN_OR_RETURN(SchemaFile file,
                      LoadSchemaFile(path, train_data, absl::GetFlag(FLAGS_hash_buckets)));
  *schema = std::move(file.schema);
  if (set(max_line, int64_t{1} << 20)) schema->max_line_bytes = static_cast<size_t>(max_line);
  if (file.embedding_dim > 0) {
    const int flag_dim = absl::GetFlag(FLAGS_embedding_dim);
    if (flag_dim != 16 && flag_dim != file.embedding_dim) {
      return absl::InvalidArgumentError(absl::StrCat("--embedding_dim=", flag_dim, " but --schema=",
                                                     path, " says ", file.embedding_dim));
    }
    m->embedding_dim = file.embedding_dim;
    // dlrm's bottom MLP ends at the embedding width: follow it when the flag is the default.
    if (absl::GetFlag(FLAGS_bottom_mlp) == "64,16" && !m->bottom_mlp.empty()) {
      m->bottom_mlp.back() = file.embedding_dim;
    }
  }
  PS_RETURN_IF_ERROR(ComputeDenseStats(train_data, file.stats_rows, schema));
  SetSchemaColumns(*schema, m);
  for (const SparseColumn& c : schema->sparse) {
    if (c.embedding_dim > 0 && c.embedding_dim != m->embedding_dim && m->graph == nullptr &&
        (m->name == "dlrm" || m->name == "deepfm")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--schema=", path, ": column \"", c.name, "\" has embedding_dim ",
          c.embedding_dim, ", but ",
          m->name == "dlrm" ? "dlrm's dot interaction" : "deepfm's FM", " needs every embedding ",
          m->embedding_dim, " wide (--model=wide_deep, deep_tower or dcn_v2 take per-column widths)"));
    }
  }
  return absl::OkStatus();
}

// --train_stream and its options; the files a schema's statistics read
// (--train_data's, or the stream's first complete partition's).
absl::StatusOr<std::vector<std::string>> TakeStreamFlags(TrainMode mode, TrainOptions* t) {
  StreamOptions& s = t->train_stream;
  s.dir = absl::GetFlag(FLAGS_train_stream);
  if (s.dir.empty()) {
    if (t->train_data.empty()) {
      return absl::InvalidArgumentError("--train_data (or --train_stream) is required");
    }
    return t->train_data;
  }
  if (!t->train_data.empty()) {
    return absl::InvalidArgumentError("--train_data and --train_stream: give one of them");
  }
  if (mode == TrainMode::kPipeline) {
    return absl::InvalidArgumentError("--train_stream is not built for --mode=pipeline");
  }
  if (absl::GetFlag(FLAGS_epochs) != 1) {
    return absl::InvalidArgumentError("--epochs: a --train_stream is read once");
  }
  s.start = absl::GetFlag(FLAGS_stream_start);
  s.end = absl::GetFlag(FLAGS_stream_end);
  const double poll = absl::GetFlag(FLAGS_stream_poll_secs);
  const double idle = absl::GetFlag(FLAGS_stream_idle_secs);
  if (!(poll > 0 && poll <= 3600)) {
    return absl::InvalidArgumentError("--stream_poll_secs must be in (0, 3600]");
  }
  if (!(idle >= 0)) return absl::InvalidArgumentError("--stream_idle_secs must be >= 0");
  s.poll = absl::Seconds(poll);
  s.idle_timeout = absl::Seconds(idle);
  PS_RETURN_IF_ERROR(ValidateStreamOptions(s));
  return FirstPartitionFiles(s, 1);
}

}  // namespace

absl::Status TakeDataFlags(WorkerOptions* o) {
  TrainOptions& t = o->train;
  ModelOptions& m = t.model;
  m.num_dense = absl::GetFlag(FLAGS_dense_fields);
  m.num_sparse = absl::GetFlag(FLAGS_sparse_fields);
  t.train_data = SplitList(absl::GetFlag(FLAGS_train_data));
  PS_ASSIGN_OR_RETURN(std::vector<std::string> schema_data, TakeStreamFlags(o->mode, &t));
  m.step_probs = !t.train_stream.dir.empty();
  PS_RETURN_IF_ERROR(SchemaFromFlags(schema_data, &t.schema, &m));
  t.eval_data = SplitList(absl::GetFlag(FLAGS_eval_data));
  t.eval_meta = absl::GetFlag(FLAGS_eval_meta);
  t.reader_threads = absl::GetFlag(FLAGS_reader_threads);
  if (t.reader_threads < 1 || t.reader_threads > 64) {
    return absl::InvalidArgumentError("--reader_threads must be in [1, 64]");
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
