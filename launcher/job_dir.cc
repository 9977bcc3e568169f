#include "launcher/job_dir.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/coordinator/checkpoint_manager.h"

namespace pstrain::launcher {
namespace {

namespace fs = std::filesystem;

// Whether the first lines of `path` look like metrics records.
bool LooksLikeMetrics(const fs::path& path) {
  std::error_code ec;
  if (fs::file_size(path, ec) == 0 || ec) return false;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  char buf[4096];
  const size_t n = std::fread(buf, 1, sizeof(buf), f);
  std::fclose(f);
  const std::string head(buf, n);
  return absl::StrContains(head, "\"event\":\"progress\"") ||
         absl::StrContains(head, "\"event\":\"eval\"") ||
         absl::StrContains(head, "\"event\":\"summary\"");
}

double UnixTime(fs::file_time_type t) {
  const auto sys = std::chrono::file_clock::to_sys(t);
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

}  // namespace

absl::StatusOr<std::string> FindMetricsFile(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("--job_dir=", dir, ": no such folder"));
  }
  const fs::path preferred = fs::path(dir) / "metrics.jsonl";
  if (fs::is_regular_file(preferred, ec)) return preferred.string();
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".jsonl" && LooksLikeMetrics(e.path())) {
      found.push_back(e.path().string());
    }
  }
  std::sort(found.begin(), found.end());
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--job_dir=", dir, ": no metrics file (metrics.jsonl, or a *.jsonl written by "
        "--metrics_out)"));
  }
  if (found.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("--job_dir=", dir, ": several metrics files (",
                                                   absl::StrJoin(found, ", "),
                                                   "): name one with --metrics=FILE"));
  }
  return found[0];
}

std::vector<JobCheckpoint> FindCheckpoints(const std::string& dir) {
  std::vector<JobCheckpoint> out;
  std::vector<fs::path> parents = {fs::path(dir)};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_directory(ec) && !absl::StartsWith(e.path().filename().string(), "ckpt-")) {
      parents.push_back(e.path());
    }
  }
  for (const fs::path& parent : parents) {
    for (const auto& e : fs::directory_iterator(parent, ec)) {
      if (!e.is_directory(ec) || !absl::StartsWith(e.path().filename().string(), "ckpt-")) continue;
      absl::StatusOr<server::Manifest> m = server::ReadManifest(e.path().string());
      if (!m.ok()) continue;  // unfinished: it does not exist
      JobCheckpoint c;
      c.step = m->step;
      c.path = e.path().string();
      for (const server::ShardEntry& s : m->shards) c.bytes += s.bytes;
      c.time_unix = UnixTime(fs::last_write_time(e.path() / "manifest.json", ec));
      out.push_back(std::move(c));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const JobCheckpoint& a, const JobCheckpoint& b) { return a.step < b.step; });
  return out;
}

}  // namespace pstrain::launcher
