// pstrain predict: scores a file with an exported model, in one process.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "worker/predictor.h"

namespace pstrain::launcher {

namespace {

FlagSet PredictFlags() {
  FlagSet flags;
  flags.Define("model", "", "Folder written by --save_model (model.json + table files).")
      .Define("data", "",
              "Rows to score: comma-separated paths or globs, or - for standard input, in the "
              "format of the training data (the schema the model records).")
      .Define("out", "", "Write one click probability per line here (optional).")
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

}  // namespace

std::string PredictHelp() {
  return absl::StrCat(
      "usage: pstrain predict --model=DIR --data=FILES|- [--out=SCORES]\n\n"
      "Scores every row of FILES with the exported model in DIR (no cluster needed),\n"
      "writes the probabilities to SCORES and prints AUC and log loss against the\n"
      "files' labels.\n\n",
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
  o.batch_size = static_cast<int>(batch);
  StdinFile stdin_file;
  if (o.data == std::vector<std::string>{"-"}) {
    PS_ASSIGN_OR_RETURN(std::string path, stdin_file.Copy());
    o.data = {path};
  }
  PS_ASSIGN_OR_RETURN(auto r, worker::PredictFile(o));
  std::printf("scored %lld rows in %.1f s: AUC %.4f, logloss %.4f, accuracy %.4f%s%s\n",
              static_cast<long long>(r.rows), r.seconds, r.metrics.auc, r.metrics.logloss,
              r.metrics.accuracy, o.out.empty() ? "" : "; scores in ", o.out.c_str());
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
