#include "bench/reader_bench.h"

#include <stdlib.h>

#include <cerrno>
#include <ctime>
#include <filesystem>
#include <memory>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/status.h"
#include "worker/data/compress_file.h"
#include "worker/data/file_set.h"
#include "worker/data/shard_scanner.h"
#include "worker/data/synthetic.h"

namespace pstrain::bench {
namespace {

using worker::Compression;

// One input kind: the plain TSV, or the TSV compressed with `compression`
// at `level`. The first is the baseline of vs_tsv. Adding a kind is one
// line here.
struct InputKind {
  const char* name;
  const char* suffix;
  Compression compression;
  int level;
};
constexpr InputKind kInputs[] = {
    {"tsv", ".tsv", Compression::kNone, 0},
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

// Scans the file at `path` `passes` times, each with a new scanner.
absl::StatusOr<ScanResult> Scan(const std::string& path, int passes) {
  PS_ASSIGN_OR_RETURN(std::vector<worker::InputFile> files, worker::ExpandFilePatterns({path}));
  ScanResult r;
  for (int p = 0; p < passes; ++p) {
    const Clock::time_point t0 = Clock::now();
    const double cpu0 = ThreadCpuSeconds();
    std::vector<worker::FileRange> ranges = worker::ShardRanges(files, 0, 1);
    PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ShardScanner> scanner,
                        worker::ShardScanner::Create(files, std::move(ranges), {}));
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
  PS_ASSIGN_OR_RETURN(const std::string dir, MakeTempDir(options.temp_dir));
  struct RemoveDir {
    std::string path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } cleanup{dir};
  worker::SyntheticOptions world;  // Criteo's shape: 13 integers, 26 categories
  world.rows = options.rows;
  const std::string tsv = dir + "/train.tsv";
  PS_ASSIGN_OR_RETURN(worker::SyntheticReport report, worker::WriteSynthetic(world, tsv));
  spdlog::info("reader: wrote {} rows ({:.1f} MB) in {:.1f}s", report.rows, report.bytes / 1e6,
               report.seconds);

  double baseline_rows_per_sec = 0, baseline_rows_per_cpu_sec = 0;
  for (const InputKind& kind : kInputs) {
    const std::string path = dir + "/train" + kind.suffix;
    if (kind.compression != Compression::kNone) {
      const Clock::time_point t0 = Clock::now();
      PS_RETURN_IF_ERROR(worker::CompressFile(tsv, path, kind.compression, kind.level));
      spdlog::info("reader: compressed {} in {:.1f}s", path, SecondsSince(t0));
    }
    PS_ASSIGN_OR_RETURN(ScanResult r, Scan(path, options.passes));
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
