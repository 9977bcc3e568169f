// pstrain serve: an HTTP prediction server over an exported model folder,
// taking up each new version written there (serve/model_server.h).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/byte_size.h"
#include "common/process.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "serve/model_server.h"

namespace pstrain::launcher {
namespace {

FlagSet ServeFlags() {
  FlagSet flags;
  flags.Define("model_dir", "",
               "Folder written by --save_model (model.json + table files) or --export_dir. Each "
               "new version written there (by a later --save_model, --keep_best or "
               "--export_every_steps) is loaded and served in place of the old one; until the "
               "first one is loaded, /predict and /readyz answer 503. A folder that does not "
               "exist is an error (exit 2), unless --wait_for_model.")
      .Define("wait_for_model", "false",
              "Start even when --model_dir does not exist yet, and wait for it and its first "
              "model (logged every 5 s).")
      .Define("host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface).")
      .Define("port", "8500", "Port to listen on (0: any free port, printed at start).")
      .Define("threads", "4", "Request threads.")
      .Define("poll_secs", "1", "How often to look for a new version of the model.")
      .Define("max_request_rows", "4096", "Most rows in one request (more: 400).")
      .Define("max_request_bytes", "16M", "Largest request body (larger: 413).")
      .Define("log_level", "info", "Logs on stderr: trace | debug | info | warn | error.");
  return flags;
}

}  // namespace

std::string ServeHelp() {
  return absl::StrCat(
      "usage: pstrain serve --model_dir=DIR [--port=8500] [--host=127.0.0.1]\n\n"
      "Serves click probabilities from the model in DIR over HTTP:\n"
      "  POST /predict   rows as text, one per line in the training data's layout (the label\n"
      "                  column may be left out), or JSON {\"rows\": [{\"I1\": 3, \"C1\": \"a9\", ...}]}\n"
      "                  with the schema's column names, or {\"lines\": [\"...\"]};\n"
      "                  answers {\"model_version\", \"model_step\", \"probabilities\": [...]}\n"
      "                  (and \"warnings\" naming the columns rows lacked: they score with\n"
      "                  their missing value, e.g. a standardized column's training mean)\n"
      "  GET  /healthz   200 as soon as the port is bound (the version served, if any)\n"
      "  GET  /readyz    200 once a model is loaded; 503 with {\"ready\": false, \"reason\"}\n"
      "                  while it loads or there is none\n"
      "  GET  /metrics   requests, latency, the version and its age (Prometheus text)\n"
      "Bad requests get 400 with the reason (row and column named). A new version in DIR\n"
      "is loaded whole beside the one served and swapped in between requests; one that\n"
      "cannot be read (bad checksum, missing file) is refused and the old one kept.\n"
      "Scores equal `pstrain predict`'s: the same code scores both.\n"
      "  curl -s --data-binary @rows.tsv http://127.0.0.1:8500/predict\n\n",
      ServeFlags().Help());
}

absl::Status RunServe(const std::vector<std::string>& argv) {
  FlagSet flags = ServeFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  InitLogging("serve", flags.Get("log_level"));
  worker::ServeOptions o;
  o.model_dir = flags.Get("model_dir");
  o.host = flags.Get("host");
  if (o.model_dir.empty()) return UsageError("--model_dir is required");
  const std::string wait = flags.Get("wait_for_model");
  if (wait != "true" && wait != "false" && wait != "1" && wait != "0" && wait != "yes" &&
      wait != "no") {
    return UsageError(absl::StrCat("--wait_for_model=", wait, ": true or false"));
  }
  o.wait_for_model = flags.GetBool("wait_for_model");
  std::error_code ec;
  if (!o.wait_for_model && !std::filesystem::exists(o.model_dir, ec)) {
    return UsageError(absl::StrCat("--model_dir=", o.model_dir,
                                   ": no such folder (--wait_for_model waits for it to appear)"));
  }
  if (std::filesystem::exists(o.model_dir, ec) && !std::filesystem::is_directory(o.model_dir, ec)) {
    return UsageError(absl::StrCat("--model_dir=", o.model_dir, ": not a folder"));
  }
  PS_ASSIGN_OR_RETURN(int64_t port, flags.GetInt("port"));
  PS_ASSIGN_OR_RETURN(int64_t threads, flags.GetInt("threads"));
  PS_ASSIGN_OR_RETURN(double poll, flags.GetDouble("poll_secs"));
  PS_ASSIGN_OR_RETURN(int64_t rows, flags.GetInt("max_request_rows"));
  absl::StatusOr<uint64_t> bytes = ParseByteSize(flags.Get("max_request_bytes"));
  if (!bytes.ok()) return UsageError(absl::StrCat("--max_request_bytes: ", bytes.status().message()));
  if (port < 0 || port > 65535) return UsageError("--port must be in 0..65535");
  if (threads < 1 || threads > 256) return UsageError("--threads must be in 1..256");
  if (!(poll > 0)) return UsageError("--poll_secs must be > 0");
  if (rows < 1) return UsageError("--max_request_rows must be >= 1");
  if (*bytes < 1024) return UsageError("--max_request_bytes must be at least 1K");
  o.port = static_cast<int>(port);
  o.threads = static_cast<int>(threads);
  o.poll = absl::Seconds(poll);
  o.max_request_rows = static_cast<int>(rows);
  o.max_request_bytes = static_cast<size_t>(*bytes);

  // SIGINT / SIGTERM end the server; blocked before any thread starts so
  // that only sigwait below takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  PS_ASSIGN_OR_RETURN(std::unique_ptr<worker::ModelServer> server,
                      worker::ModelServer::Start(std::move(o)));
  std::printf("serving %s on %s (POST /predict, GET /healthz, GET /readyz, GET /metrics)\n",
              flags.Get("model_dir").c_str(), server->url().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  server->Stop();
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
