#include "bench/reader_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/base/casts.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/bench_util.h"
#include "common/hash.h"
#include "common/status.h"
#include "data/compress_file.h"
#include "data/file_set.h"
#include "data/reader.h"
#include "data/schema_file.h"
#include "data/shard_scanner.h"
#include "data/synthetic.h"

namespace pstrain::bench {
namespace {

using worker::Compression;

// One input kind: the plain TSV, the same rows as CSV with a header line
// and the label last (read with a schema), or the TSV compressed with
// `compression` at `level`. The first is the baseline of vs_tsv. Adding a
// kind is one line here.
struct InputKind {
  const char* name;
  const char* suffix;
  Compression compression;
  int level;
  bool csv = false;
};
constexpr InputKind kInputs[] = {
    {"tsv", ".tsv", Compression::kNone, 0},
    {"csv_header", ".csv", Compression::kNone, 0, /*csv=*/true},
    {"gz", ".tsv.gz", Compression::kGzip, -1},  // zlib's default level (6)
    {"zst", ".tsv.zst", Compression::kZstd, 3},
};

struct ScanResult {
  int64_t rows = 0;
  double best_seconds = 0;      // wall
  double best_cpu_seconds = 0;  // this thread's CPU time
};

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The Criteo rows of `tsv` as CSV: a header, the integers, the categories,
// the label last; and the schema that reads them as the TSV reads.
absl::StatusOr<worker::Schema> WriteCsv(const std::string& tsv, const std::string& csv) {
  std::ifstream in(tsv);
  std::ofstream out(csv);
  std::vector<std::string> names;
  for (int i = 1; i <= 13; ++i) names.push_back(absl::StrCat("I", i));
  for (int c = 1; c <= 26; ++c) names.push_back(absl::StrCat("C", c));
  out << absl::StrJoin(names, ",") << ",label\n";
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) return absl::InternalError(tsv + ": a line without a tab");
    std::string rest = line.substr(tab + 1);
    for (char& ch : rest) ch = ch == '\t' ? ',' : ch;
    out << rest << ',' << line.substr(0, tab) << '\n';
  }
  out.close();
  if (!out) return absl::InternalError("cannot write " + csv);
  const std::string schema = absl::StrCat(
      R"({"format": "csv", "header": true, "label": "label", "dense_transform": "log1p_clamp",)",
      R"("dense": [")", absl::StrJoin(names.begin(), names.begin() + 13, "\",\""),
      R"("], "sparse": [")", absl::StrJoin(names.begin() + 13, names.end(), "\",\""), R"("]})");
  PS_ASSIGN_OR_RETURN(worker::SchemaFile f, worker::ParseSchemaJson(schema, "bench", {csv}, 0));
  return f.schema;
}

// Scans the file at `path` `passes` times, each with a new scanner.
absl::StatusOr<ScanResult> Scan(const std::string& path, const worker::Schema& schema,
                                int passes) {
  PS_ASSIGN_OR_RETURN(std::vector<worker::InputFile> files, worker::ExpandFilePatterns({path}));
  ScanResult r;
  for (int p = 0; p < passes; ++p) {
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = ThreadCpuSeconds();
    std::vector<worker::FileRange> ranges = worker::ShardRanges(files, 0, 1);
    worker::ScannerOptions so;
    so.schema = schema;
    PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ShardScanner> scanner,
                        worker::ShardScanner::Create(files, std::move(ranges), so));
    worker::ParsedRow row;
    int64_t rows = 0;
    while (true) {
      PS_ASSIGN_OR_RETURN(bool more, scanner->NextRow(&row));
      if (!more) break;
      ++rows;
    }
    const double seconds = SecondsSince(t0);
    const double cpu = ThreadCpuSeconds() - cpu0;
    if (p == 0 || seconds < r.best_seconds) r.best_seconds = seconds;
    if (p == 0 || cpu < r.best_cpu_seconds) r.best_cpu_seconds = cpu;
    r.rows = rows;
  }
  return r;
}

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// An order-sensitive checksum of a batch's labels, values and ids.
uint64_t BatchChecksum(const worker::Batch& b, uint64_t h) {
  const auto mix = [&h](uint64_t v) { h = Mix64(h ^ v) + 0x9e3779b97f4a7c15ULL; };
  for (float v : b.labels) mix(absl::bit_cast<uint32_t>(v));
  for (float v : b.extra_labels) mix(absl::bit_cast<uint32_t>(v));
  for (float v : b.dense) mix(absl::bit_cast<uint32_t>(v));
  for (int f = 0; f < b.num_sparse; ++f) {
    for (uint64_t id : b.ids[f]) mix(id);
    for (uint32_t o : b.offsets[f]) mix(o);
  }
  return h;
}

struct DataPass {
  int64_t rows = 0;
  double seconds = 0;      // wall, from Open to the end
  double cpu_seconds = 0;  // every thread of the process
  uint64_t checksum = 0;
};

// One pass over `o`'s data with a new DataReader; the checksum only when
// `checksum`.
absl::StatusOr<DataPass> ReadPass(const worker::ReaderOptions& o, bool checksum) {
  DataPass p;
  const Clock::time_point t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::DataReader> reader, worker::DataReader::Open(o));
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const worker::Batch> b, reader->Next());
    if (b == nullptr) break;
    p.rows += b->size;
    if (checksum) p.checksum = BatchChecksum(*b, p.checksum);
  }
  reader.reset();  // its threads' CPU time counted
  p.seconds = SecondsSince(t0);
  p.cpu_seconds = ProcessCpuSeconds() - cpu0;
  return p;
}

// `epochs` + 1 epochs of `o`'s data through one DataReader, as a training
// job reads them: the rate of each epoch after the first (whose buffers the
// later ones reuse, and whose page faults they do not pay).
absl::StatusOr<std::vector<DataPass>> ReadEpochs(worker::ReaderOptions o, int epochs) {
  o.epochs = epochs + 1;
  std::vector<DataPass> out;
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::DataReader> reader, worker::DataReader::Open(o));
  int epoch = 0;
  DataPass p;
  Clock::time_point t0 = Clock::now();
  double cpu0 = ProcessCpuSeconds();
  auto close = [&] {
    if (epoch > 0) {
      p.seconds = SecondsSince(t0);
      p.cpu_seconds = ProcessCpuSeconds() - cpu0;
      out.push_back(p);
    }
    p = DataPass{};
    t0 = Clock::now();
    cpu0 = ProcessCpuSeconds();
  };
  while (true) {
    PS_ASSIGN_OR_RETURN(std::shared_ptr<const worker::Batch> b, reader->Next());
    if (b == nullptr) break;
    // A batch is of one epoch: the clock of the next starts at its first.
    if (reader->last_epoch() != epoch) {
      close();
      epoch = reader->last_epoch();
    }
    p.rows += b->size;
  }
  close();
  return out;
}

// The data mode: options.data read by DataReader per threads value.
absl::Status RunDataReaderBench(const ReaderBenchOptions& options) {
  worker::ReaderOptions o;
  o.patterns = options.data;
  o.batch_size = options.batch_size;
  if (!options.schema.empty()) {
    PS_ASSIGN_OR_RETURN(worker::SchemaFile f,
                        worker::LoadSchemaFile(options.schema, options.data, 0));
    o.schema = std::move(f.schema);
    PS_RETURN_IF_ERROR(worker::ComputeDenseStats(options.data, f.stats_rows, &o.schema));
  }
  PS_ASSIGN_OR_RETURN(std::vector<worker::InputFile> files,
                      worker::ExpandFilePatterns(options.data));
  uint64_t file_bytes = 0;
  bool parquet = false;
  for (const worker::InputFile& f : files) {
    file_bytes += f.size;
    parquet = parquet || f.parquet;
  }
  const std::string input = std::filesystem::path(files.front().path).filename().string();
  for (int threads : options.threads) {
    o.reader_threads = threads;
    PS_ASSIGN_OR_RETURN(DataPass first, ReadPass(o, /*checksum=*/true));
    std::vector<double> rates, cpu_rates;
    for (int p = 0; p < options.passes; ++p) {
      PS_ASSIGN_OR_RETURN(DataPass pass, ReadPass(o, /*checksum=*/false));
      if (pass.rows != first.rows) {
        return absl::InternalError(absl::StrCat(input, ": ", pass.rows, " rows, then ", first.rows));
      }
      rates.push_back(static_cast<double>(pass.rows) / pass.seconds);
      cpu_rates.push_back(static_cast<double>(pass.rows) / pass.cpu_seconds);
    }
    PS_ASSIGN_OR_RETURN(std::vector<DataPass> epochs, ReadEpochs(o, options.passes));
    std::vector<double> epoch_rates, epoch_cpu_rates;
    for (const DataPass& e : epochs) {
      if (e.rows != first.rows) {
        return absl::InternalError(absl::StrCat(input, ": an epoch of ", e.rows, " rows, a pass of ",
                                                first.rows));
      }
      epoch_rates.push_back(static_cast<double>(e.rows) / e.seconds);
      epoch_cpu_rates.push_back(static_cast<double>(e.rows) / e.cpu_seconds);
    }
    JsonLine line;
    line.Add("bench", "reader")
        .Add("input", input)
        .Add("format", parquet ? "parquet" : "text")
        .Add("files", files.size())
        .Add("file_bytes", file_bytes)
        .Add("threads", threads)
        .Add("rows", first.rows)
        .Add("rows_per_sec", Median(rates))
        .Add("best_rows_per_sec", *std::max_element(rates.begin(), rates.end()))
        // Rows per CPU second of every thread of the process (the reader's,
        // its decoding threads', this one's).
        .Add("rows_per_cpu_sec", Median(cpu_rates))
        // One reader's later epochs (a training job's steady state: no
        // reader opened, no buffer grown): the median over `passes` epochs.
        .Add("epoch_rows_per_sec", Median(epoch_rates))
        .Add("epoch_rows_per_cpu_sec", Median(epoch_cpu_rates))
        .Add("passes", options.passes)
        .Add("batch_size", options.batch_size)
        .Add("checksum", absl::StrFormat("%016x", first.checksum));
    PrintResult(line);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MakeTempDir(const std::string& temp_dir) {
  std::string base = temp_dir;
  if (base.empty()) {
    const char* env = std::getenv("TMPDIR");
    base = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  std::string dir = absl::StrCat(base, "/pstrain_reader_bench.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return ErrnoToStatus(errno, absl::StrCat("mkdtemp ", dir));
  return dir;
}

}  // namespace

absl::Status RunReaderBench(const ReaderBenchOptions& options) {
  if (options.rows < 1 || options.passes < 1) {
    return absl::InvalidArgumentError("reader bench: rows and passes must be positive");
  }
  if (!options.data.empty()) {
    if (options.threads.empty()) return absl::InvalidArgumentError("reader bench: no threads");
    return RunDataReaderBench(options);
  }
  PS_ASSIGN_OR_RETURN(const std::string dir, MakeTempDir(options.temp_dir));
  RemoveDirOnExit cleanup{dir};
  worker::SyntheticOptions world;  // Criteo's shape: 13 integers, 26 categories
  world.rows = options.rows;
  const std::string tsv = dir + "/train.tsv";
  PS_ASSIGN_OR_RETURN(worker::SyntheticReport report, worker::WriteSynthetic(world, tsv));
  spdlog::info("reader: wrote {} rows ({:.1f} MB) in {:.1f}s", report.rows, report.bytes / 1e6,
               report.seconds);

  double baseline_rows_per_sec = 0, baseline_rows_per_cpu_sec = 0;
  for (const InputKind& kind : kInputs) {
    const std::string path = dir + "/train" + kind.suffix;
    worker::Schema schema;  // the Criteo layout
    if (kind.csv) {
      PS_ASSIGN_OR_RETURN(schema, WriteCsv(tsv, path));
    } else if (kind.compression != Compression::kNone) {
      const Clock::time_point t0 = Clock::now();
      PS_RETURN_IF_ERROR(worker::CompressFile(tsv, path, kind.compression, kind.level));
      spdlog::info("reader: compressed {} in {:.1f}s", path, SecondsSince(t0));
    }
    PS_ASSIGN_OR_RETURN(ScanResult r, Scan(path, schema, options.passes));
    if (r.rows != report.rows) {
      return absl::InternalError(
          absl::StrCat(path, ": scanned ", r.rows, " rows, ", report.rows, " written"));
    }
    const double rows_per_sec = r.rows / r.best_seconds;
    const double rows_per_cpu_sec = r.rows / r.best_cpu_seconds;
    if (baseline_rows_per_sec == 0) {
      baseline_rows_per_sec = rows_per_sec;
      baseline_rows_per_cpu_sec = rows_per_cpu_sec;
    }
    const uint64_t file_bytes = std::filesystem::file_size(path);
    JsonLine line;
    line.Add("bench", "reader")
        .Add("input", kind.name)
        .Add("compression", worker::CompressionName(kind.compression))
        .Add("level", kind.level)
        .Add("rows", r.rows)
        .Add("file_bytes", file_bytes)
        .Add("text_bytes", report.bytes)
        .Add("rows_per_sec", rows_per_sec)
        .Add("text_mb_per_sec", report.bytes / 1e6 / r.best_seconds)
        .Add("vs_tsv", rows_per_sec / baseline_rows_per_sec)
        // The same per CPU second of the scanning thread: steadier on a
        // loaded machine, where wall time includes waiting for a core.
        .Add("rows_per_cpu_sec", rows_per_cpu_sec)
        .Add("vs_tsv_cpu", rows_per_cpu_sec / baseline_rows_per_cpu_sec)
        .Add("passes", options.passes)
        .Add("threads", 1);
    PrintResult(line);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::bench
