// pstrain predict: scores a file with an exported model, in one process.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "serve/predictor.h"

namespace pstrain::launcher {

namespace {

FlagSet PredictFlags() {
  FlagSet flags;
  flags.Define("model", "", "Folder written by --save_model (model.json + table files).")
      .Define("data", "",
              "Rows to score: comma-separated paths or globs, or - for standard input, in the "
              "format of the training data (the schema the model records).")
      .Define("out", "",
              "Write one line per input line here (a header line aside), in order: the click "
              "probability, or, for a line that does not parse, an empty prediction, a tab and "
              "the reason (a blank line's is \"blank line\"). Optional.")
      .Define("on_bad_line", "mark",
              "mark: a line that does not parse gets an empty prediction and its reason in "
              "--out; fail: the command stops at it, naming FILE:LINE (exit 2).")
      .Define("batch_size", "4096", "Rows per batch.");
  return flags;
}

// Standard input copied to a temporary file (the readers need a file to
// split and to read twice over for a header); removed by the destructor.
class StdinFile {
 public:
  ~StdinFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }
  absl::StatusOr<std::string> Copy() {
    const char* tmp = std::getenv("TMPDIR");
    std::string path = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/pstrain-stdin.XXXXXX");
    int fd = mkstemp(path.data());
    if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
    path_ = path;
    char buf[1 << 16];
    while (true) {
      ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        close(fd);
        return absl::InternalError(absl::StrCat("reading standard input: ", std::strerror(errno)));
      }
      if (n == 0) break;
      for (ssize_t done = 0; done < n;) {
        ssize_t w = write(fd, buf + done, static_cast<size_t>(n - done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
          close(fd);
          return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
        }
        done += w;
      }
    }
    close(fd);
    return path_;
  }

 private:
  std::string path_;
};

// Errors of the input (files, model folder, layout, a bad line with
// --on_bad_line=fail): exit 2, like a bad flag.
bool IsBadInput(const absl::Status& s) {
  return absl::IsInvalidArgument(s) || absl::IsNotFound(s) || absl::IsPermissionDenied(s) ||
         absl::IsDataLoss(s) || absl::IsFailedPrecondition(s);
}

}  // namespace

std::string PredictHelp() {
  return absl::StrCat(
      "usage: pstrain predict --model=DIR --data=FILES|- [--out=SCORES] [--on_bad_line=mark|fail]\n\n"
      "Scores every row of FILES with the exported model in DIR (no cluster needed),\n"
      "writes the probabilities to SCORES, one line per input line in order (so that\n"
      "`paste FILE SCORES` lines them up), and prints AUC and log loss against the\n"
      "files' labels. A model of several heads (a model file's) writes one column per\n"
      "head, tab-separated, in the model file's order, and prints each head's figures\n"
      "(a regression head's value and RMSE). A line that does not parse gets an empty prediction and, after a\n"
      "tab, the reason (or, with --on_bad_line=fail, stops the command naming FILE:LINE).\n"
      "Bad input exits 2: flags, a model folder or data file that cannot be read, data\n"
      "whose first lines are not in the model's layout (the separator it seems to use\n"
      "is named), a bad line with --on_bad_line=fail.\n\n",
      PredictFlags().Help());
}

absl::Status RunPredict(const std::vector<std::string>& argv) {
  FlagSet flags = PredictFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  PS_ASSIGN_OR_RETURN(int64_t batch, flags.GetInt("batch_size"));
  worker::PredictOptions o;
  o.model_dir = flags.Get("model");
  o.data = absl::StrSplit(flags.Get("data"), ',', absl::SkipEmpty());
  o.out = flags.Get("out");
  if (o.model_dir.empty() || o.data.empty()) return UsageError("--model and --data are required");
  if (batch < 1) return UsageError("--batch_size must be >= 1");
  const std::string on_bad = flags.Get("on_bad_line");
  if (on_bad != "mark" && on_bad != "fail") {
    return UsageError(absl::StrCat("--on_bad_line=", on_bad, ": mark or fail"));
  }
  o.on_bad_line = on_bad == "fail" ? worker::OnBadLine::kFail : worker::OnBadLine::kMark;
  std::error_code ec;
  if (!std::filesystem::is_directory(o.model_dir, ec)) {
    return UsageError(absl::StrCat("--model=", o.model_dir, ": no such folder"));
  }
  o.batch_size = static_cast<int>(batch);
  StdinFile stdin_file;
  if (o.data == std::vector<std::string>{"-"}) {
    PS_ASSIGN_OR_RETURN(std::string path, stdin_file.Copy());
    o.data = {path};
  }
  absl::StatusOr<worker::PredictResult> r = worker::PredictFile(o);
  if (!r.ok()) return IsBadInput(r.status()) ? WithExitCode(r.status(), 2) : r.status();
  std::printf("scored %lld rows in %.1f s: AUC %.4f, logloss %.4f, NE %.4f, calibration %.3f%s%s\n",
              static_cast<long long>(r->rows), r->seconds, r->metrics.auc, r->metrics.logloss,
              r->metrics.normalized_entropy, r->metrics.calibration,
              o.out.empty() ? "" : "; scores in ", o.out.c_str());
  for (const worker::HeadEval& h : r->heads) std::printf("  %s\n", worker::HeadEvalText(h).c_str());
  if (r->bad_lines > 0) {
    std::printf("%lld bad line%s: an empty prediction and the reason each%s; the first: %s\n",
                static_cast<long long>(r->bad_lines), r->bad_lines == 1 ? "" : "s",
                o.out.empty() ? " (with --out)" : absl::StrCat(" in ", o.out).c_str(),
                r->first_bad.c_str());
  }
  if (r->blank_lines > 0) {
    std::printf("%lld blank line%s: an empty prediction each\n",
                static_cast<long long>(r->blank_lines), r->blank_lines == 1 ? "" : "s");
  }
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
