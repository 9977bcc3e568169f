#include "data/partition_stream.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace pstrain::worker {
namespace {

bool IsHidden(const char* name) { return name[0] == '_' || name[0] == '.'; }

// The entries of folder `path` (not "." or ".."), sorted, each with whether
// it is a folder and a regular file (stat(2), links followed).
struct Entry {
  std::string name;
  bool dir = false;
  bool file = false;
  uint64_t size = 0;
};

absl::StatusOr<std::vector<Entry>> ListFolder(const std::string& path) {
  DIR* d = ::opendir(path.c_str());
  if (d == nullptr) return ErrnoToStatus(errno, absl::StrCat("--train_stream: opendir ", path));
  std::vector<Entry> out;
  while (dirent* e = ::readdir(d)) {
    if (std::string_view(e->d_name) == "." || std::string_view(e->d_name) == "..") continue;
    Entry entry;
    entry.name = e->d_name;
    struct stat st {};
    // A file removed between readdir and stat is simply not there.
    if (::stat(absl::StrCat(path, "/", entry.name).c_str(), &st) != 0) continue;
    entry.dir = S_ISDIR(st.st_mode);
    entry.file = S_ISREG(st.st_mode);
    entry.size = static_cast<uint64_t>(st.st_size);
    out.push_back(std::move(entry));
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  return out;
}

absl::Status Walk(const std::string& root, const std::string& rel, int depth,
                  std::vector<std::string>* out) {
  const std::string path = rel.empty() ? root : absl::StrCat(root, "/", rel);
  PS_ASSIGN_OR_RETURN(std::vector<Entry> entries, ListFolder(path));
  for (const Entry& e : entries) {
    if (e.file && e.name == kSuccessMarker && !rel.empty()) out->push_back(rel);
  }
  if (depth >= kMaxPartitionDepth) return absl::OkStatus();
  for (const Entry& e : entries) {
    if (!e.dir || IsHidden(e.name.c_str())) continue;
    PS_RETURN_IF_ERROR(Walk(root, rel.empty() ? e.name : absl::StrCat(rel, "/", e.name), depth + 1,
                            out));
  }
  return absl::OkStatus();
}

// Whether partition `name` lies within the options' start and end.
bool InRange(const StreamOptions& o, const std::string& name) {
  return name >= o.start && (o.end.empty() || name <= o.end);
}

}  // namespace

absl::Status ValidateStreamOptions(const StreamOptions& o) {
  struct stat st {};
  if (::stat(o.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train_stream=", o.dir, ": not a folder (", std::strerror(errno), ")"));
  }
  if (!o.end.empty() && o.start > o.end) {
    return absl::InvalidArgumentError(absl::StrCat("--stream_start=", o.start,
                                                   " comes after --stream_end=", o.end));
  }
  if (o.poll <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--stream_poll_secs must be positive");
  }
  if (o.idle_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--stream_idle_secs must be >= 0 (0: wait until stopped)");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListCompletePartitions(const std::string& dir) {
  std::vector<std::string> out;
  PS_RETURN_IF_ERROR(Walk(dir, "", 0, &out));
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<std::vector<InputFile>> PartitionFiles(const std::string& dir,
                                                      const std::string& name) {
  const std::string folder = absl::StrCat(dir, "/", name);
  PS_ASSIGN_OR_RETURN(std::vector<Entry> entries, ListFolder(folder));
  std::vector<std::string> paths;
  for (const Entry& e : entries) {
    if (e.file && !IsHidden(e.name.c_str())) paths.push_back(absl::StrCat(folder, "/", e.name));
  }
  if (paths.empty()) return std::vector<InputFile>{};
  return ExpandFilePatterns(paths);
}

absl::StatusOr<std::vector<std::string>> FirstPartitionFiles(const StreamOptions& o,
                                                             int max_partitions) {
  PS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListCompletePartitions(o.dir));
  std::vector<std::string> paths;
  int taken = 0;
  for (const std::string& n : names) {
    if (taken == max_partitions) break;
    if (!InRange(o, n)) continue;
    ++taken;
    PS_ASSIGN_OR_RETURN(std::vector<InputFile> files, PartitionFiles(o.dir, n));
    for (InputFile& f : files) {
      if (f.size > 0) paths.push_back(std::move(f.path));
    }
  }
  return paths;
}

absl::StatusOr<std::optional<std::string>> PartitionStream::FindNext() {
  PS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListCompletePartitions(options_.dir));
  std::optional<std::string> next;
  for (const std::string& n : names) {
    if (n < options_.start) continue;
    if (taken_any_ && n <= last_) continue;
    next = n;
    break;
  }
  return next;
}

absl::StatusOr<std::optional<Partition>> PartitionStream::Next(const std::atomic<bool>& stop) {
  if (ended_) {
    if (!end_said_) spdlog::info("stream {}: --stream_end={} reached: the stream ends", options_.dir, options_.end);
    end_said_ = true;
    return std::optional<Partition>();
  }
  const absl::Time since = absl::Now();
  absl::Time next_note = since + absl::Minutes(1);
  while (true) {
    PS_ASSIGN_OR_RETURN(std::optional<std::string> name, FindNext());
    if (name.has_value() && !options_.end.empty() && *name > options_.end) {
      name.reset();
      ended_ = true;
    }
    if (ended_) {
      spdlog::info("stream {}: past --stream_end={}: the stream ends", options_.dir, options_.end);
      end_said_ = true;
      return std::optional<Partition>();
    }
    if (name.has_value()) {
      Partition p;
      p.name = *name;
      PS_ASSIGN_OR_RETURN(p.files, PartitionFiles(options_.dir, p.name));
      last_ = p.name;
      taken_any_ = true;
      if (!options_.end.empty() && p.name == options_.end) ended_ = true;
      return std::optional<Partition>(std::move(p));
    }
    const absl::Time now = absl::Now();
    if (options_.idle_timeout > absl::ZeroDuration() && now - since >= options_.idle_timeout) {
      spdlog::info("stream {}: no partition completed after {} for {}: the stream ends",
                   options_.dir, taken_any_ ? last_ : std::string("the start"),
                   absl::FormatDuration(options_.idle_timeout));
      ended_ = true;
      end_said_ = true;
      return std::optional<Partition>();
    }
    if (now >= next_note) {
      spdlog::info("stream {}: waiting for the partition after {} ({} so far)", options_.dir,
                   taken_any_ ? last_ : std::string("the start"),
                   absl::FormatDuration(absl::Trunc(now - since, absl::Seconds(1))));
      next_note = now + absl::Minutes(1);
    }
    // Sleep in short slices so that a stopping reader leaves at once.
    for (absl::Time until = now + options_.poll; absl::Now() < until;) {
      if (stop.load(std::memory_order_relaxed)) return std::optional<Partition>();
      absl::SleepFor(std::min(absl::Milliseconds(50), until - absl::Now()));
    }
  }
}

absl::Status PartitionStream::SkipPartitions(int count) {
  PS_ASSIGN_OR_RETURN(std::vector<std::string> names, ListCompletePartitions(options_.dir));
  int skipped = 0;
  for (const std::string& n : names) {
    if (skipped == count) break;
    if (!InRange(options_, n)) continue;
    last_ = n;
    taken_any_ = true;
    ++skipped;
  }
  if (skipped < count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--train_stream=", options_.dir, ": the checkpoint is past ", count,
        " partitions, but only ", skipped, " are complete there (a partition was removed?)"));
  }
  if (!options_.end.empty() && taken_any_ && last_ == options_.end) ended_ = true;
  return absl::OkStatus();
}

}  // namespace pstrain::worker
