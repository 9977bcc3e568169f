// The export flags of a worker: periodic exports to --save_model, and the
// versioned export folder (--export_dir: bases and deltas for serving).
#include <filesystem>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "worker/flags/worker_flags.h"

ABSL_FLAG(int64_t, export_every_steps, 0,
          "The lead worker also exports the model every this many steps during training, for "
          "`pstrain serve` to take up: to --export_dir as a version (a delta of the rows changed "
          "since the last one, or a base), else to --save_model (whole: to DIR.tmp, then swapped "
          "in). The final model is saved at the end as usual. 0: only at the end.");
ABSL_FLAG(double, export_every_secs, 0,
          "Like --export_every_steps, by time: the lead worker exports after the first step that "
          "ends this many seconds after its last export (0: not by time).");
ABSL_FLAG(std::string, export_dir, "",
          "A versioned export folder for serving: the lead writes DIR/v<N>/ (a base with every "
          "row, or a delta with the rows changed since version N-1, tracked by the servers) at "
          "each --export_every_* and at the end, then points DIR/LATEST at it. Read by `pstrain "
          "serve --model_dir=DIR`, `pstrain predict --model=DIR`, `pstrain model inspect DIR`.");
ABSL_FLAG(int, export_base_every, 10,
          "--export_dir: a base (every row) after this many deltas (>= 0; 0: every version is a "
          "base).");
ABSL_FLAG(int, export_keep_bases, 2,
          "--export_dir: the newest this many bases, and the deltas after them, are kept; older "
          "versions are removed after each base (>= 1).");

namespace pstrain::worker {

absl::Status TakeExportFlags(WorkerOptions* o) {
  TrainOptions& t = o->train;
  t.export_every_steps = absl::GetFlag(FLAGS_export_every_steps);
  if (t.export_every_steps < 0) {
    return absl::InvalidArgumentError("--export_every_steps must be >= 0 (0: only at the end)");
  }
  const double export_secs = absl::GetFlag(FLAGS_export_every_secs);
  if (!(export_secs >= 0)) {
    return absl::InvalidArgumentError("--export_every_secs must be >= 0 (0: not by time)");
  }
  t.export_every = absl::Seconds(export_secs);
  t.export_dir = absl::GetFlag(FLAGS_export_dir);
  t.export_base_every = absl::GetFlag(FLAGS_export_base_every);
  t.export_keep_bases = absl::GetFlag(FLAGS_export_keep_bases);
  if (t.export_base_every < 0) {
    return absl::InvalidArgumentError("--export_base_every must be >= 0 (0: every version a base)");
  }
  if (t.export_keep_bases < 1) {
    return absl::InvalidArgumentError("--export_keep_bases must be >= 1");
  }
  const auto same_folder = [](const std::string& a, const std::string& b) {
    std::filesystem::path pa = std::filesystem::absolute(a).lexically_normal();
    std::filesystem::path pb = std::filesystem::absolute(b).lexically_normal();
    return pa.lexically_relative(pb) == ".";
  };
  if (!t.export_dir.empty() && !t.save_model.empty() && same_folder(t.export_dir, t.save_model)) {
    return absl::InvalidArgumentError(
        "--export_dir and --save_model name the same folder: a versioned export folder and a "
        "model folder are different things (use two folders)");
  }
  if (!t.export_dir.empty() && o->mode == TrainMode::kPipeline) {
    return absl::InvalidArgumentError("--export_dir is not supported in --mode=pipeline");
  }
  if (!t.save_model.empty() && o->mode == TrainMode::kPipeline) {
    // Its stages hold the model's parts; nothing writes them as one model.
    return absl::InvalidArgumentError(
        "--save_model is not supported in --mode=pipeline (train in ps or allreduce mode to "
        "export a model for pstrain predict and serve)");
  }
  if (t.export_every_steps > 0 || export_secs > 0) {
    const char* flag = t.export_every_steps > 0 ? "--export_every_steps" : "--export_every_secs";
    if (t.save_model.empty() && t.export_dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " needs --export_dir or --save_model (where to export)"));
    }
    if (t.export_dir.empty() && t.keep_best.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " exports the latest model to --save_model, --keep_best keeps the best one "
                "there: use one of them (or export to --export_dir)"));
    }
    if (o->mode == TrainMode::kPipeline) {
      return absl::InvalidArgumentError(absl::StrCat(flag, " is not supported in --mode=pipeline"));
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
