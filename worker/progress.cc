#include "worker/progress.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/status.h"

namespace pstrain::worker {
namespace {

// A terminal bar redraws 4 times a second: smooth to the eye, and a redraw
// costs next to nothing.
constexpr absl::Duration kBarRedrawInterval = absl::Milliseconds(250);

std::string FormatEta(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string Rate(double per_sec) {
  if (per_sec >= 1e6) return absl::StrFormat("%.2fM", per_sec / 1e6);
  if (per_sec >= 1e3) return absl::StrFormat("%.1fk", per_sec / 1e3);
  return absl::StrFormat("%.0f", per_sec);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsFile>> MetricsFile::Open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<MetricsFile>(new MetricsFile(nullptr));
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) PS_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) return ErrnoToStatus(errno, absl::StrCat("open metrics file ", path));
  return std::unique_ptr<MetricsFile>(new MetricsFile(f));
}

absl::Status MetricsFile::Attach(const std::string& path) {
  if (file_ != nullptr || path.empty()) return absl::OkStatus();
  PS_ASSIGN_OR_RETURN(std::unique_ptr<MetricsFile> opened, Open(path));
  std::swap(file_, opened->file_);
  return absl::OkStatus();
}

MetricsFile::~MetricsFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void MetricsFile::Write(const JsonLine& line) {
  if (file_ == nullptr) return;
  std::string s = line.str() + "\n";
  // One fwrite of a whole line: concurrent writers interleave whole lines.
  std::fwrite(s.data(), 1, s.size(), file_);
  std::fflush(file_);
}

Progress::Progress(MetricsFile* metrics, absl::Duration log_every, bool terminal)
    : metrics_(metrics),
      log_every_(log_every),
      terminal_(terminal),
      start_(absl::Now()),
      last_report_(start_) {}

bool Progress::Update(const ProgressSnapshot& s, bool force) {
  absl::Time now = absl::Now();
  absl::Duration since = now - last_report_;
  // A terminal bar redraws often; log lines and metrics follow log_every.
  bool log_due = force || since >= log_every_;
  bool bar_due = terminal_ && now - last_bar_ >= kBarRedrawInterval;
  if (!log_due && !bar_due) return false;
  double elapsed = absl::ToDoubleSeconds(now - start_);
  double interval = std::max(1e-9, absl::ToDoubleSeconds(since));
  double rate = static_cast<double>(s.samples - last_samples_) / interval;
  // Time spent waiting for data is not training: the rate while busy, and
  // the share of the interval spent waiting (a stream between partitions).
  const double waited = std::clamp(s.data_seconds - last_data_seconds_, 0.0, interval);
  const double busy_rate = static_cast<double>(s.samples - last_samples_) / std::max(1e-9, interval - waited);
  const double waiting = waited / interval;
  double eta = s.fraction_done > 0 ? elapsed * (1 - s.fraction_done) / s.fraction_done : NAN;
  std::string line = absl::StrCat("step ", s.step);
  if (s.epochs > 0) absl::StrAppend(&line, " | epoch ", s.epoch + 1, "/", s.epochs);
  absl::StrAppend(&line, " | ", Rate(busy_rate * std::max(1, s.workers)), " samples/s");
  if (waiting >= 0.05) absl::StrAppend(&line, absl::StrFormat(" | waiting for data %.0f%%", 100 * waiting));
  absl::StrAppend(&line, absl::StrFormat(" | loss %.4f", s.interval_loss));
  if (std::isfinite(s.fraction_done)) {
    absl::StrAppend(&line, absl::StrFormat(" | %.0f%% | ETA %s", 100 * s.fraction_done, FormatEta(eta)));
  }
  if (std::isfinite(s.eval_auc)) {
    absl::StrAppend(&line, absl::StrFormat(" | eval AUC %.4f (step %d)", s.eval_auc, s.eval_step));
  }
  if (terminal_) {
    int width = 24;
    int filled = std::isfinite(s.fraction_done)
                     ? static_cast<int>(std::min(1.0, s.fraction_done) * width)
                     : 0;
    std::fprintf(stderr, "\r\033[K[%s%s] %s", std::string(filled, '=').c_str(),
                 std::string(width - filled, ' ').c_str(), line.c_str());
    std::fflush(stderr);
    drew_bar_ = true;
    last_bar_ = now;
  }
  if (!log_due) return false;
  if (!terminal_) spdlog::info("{}", line);
  JsonLine json;
  json.Add("event", "progress")
      .Add("step", s.step)
      .Add("samples", s.samples)
      .Add("loss", s.interval_loss)
      .Add("samples_per_sec", rate)
      .Add("busy_samples_per_sec", busy_rate)
      .Add("waiting_for_data", waiting)
      .Add("elapsed_seconds", elapsed)
      .Add("compute_seconds", s.compute_seconds)
      .Add("wait_seconds", s.wait_seconds)
      .Add("data_seconds", s.data_seconds);
  metrics_->Write(json);
  last_report_ = now;
  last_samples_ = s.samples;
  last_data_seconds_ = s.data_seconds;
  return true;
}

void Progress::Finish() {
  if (drew_bar_) std::fprintf(stderr, "\n");
  drew_bar_ = false;
}

}  // namespace pstrain::worker
