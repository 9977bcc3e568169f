// ModelServer: `pstrain serve`, an HTTP prediction server over a model
// folder written by --save_model.
//
//   POST /predict   rows as text (the training data's layout, label column
//                   optional) or JSON (serve/request_rows.h);
//                   answers {"model_version", "model_step", "probabilities"}
//                   (and "warnings" naming the columns rows lacked), or a
//                   4xx/5xx with {"error": reason}.
//   GET  /healthz   200 once the port is bound (liveness), with the version
//                   served if there is one.
//   GET  /readyz    200 with the version once a model is loaded; 503 with
//                   {"ready": false, "reason"} before (readiness).
//   GET  /metrics   requests by code, rows, latency histogram, the version,
//                   its step and the seconds since it was exported.
//
// New versions: a watcher thread looks at DIR/model.json every `poll` and
// loads a changed model in full (checksums verified) beside the one being
// served, then swaps a shared pointer (read-copy-update): a request scores
// with the version it started with, never a half-loaded one, and no
// request waits for a load. A versioned export folder (DIR/LATEST) is
// followed delta by delta with two copies of the model (double buffering:
// CheckVersionedFolder); a new base, or a gap, loads in full. A version that fails to load is refused with
// its reason in the log and /metrics, and the previous one stays; it is
// tried again when the folder changes (or at once, when it was replaced
// while being read).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/http/http_server.h"
#include "common/metrics/registry.h"
#include "serve/request_rows.h"
#include "serve/scorer.h"

namespace pstrain::worker {

struct ServeOptions {
  std::string model_dir;
  // false: a model_dir that does not exist is an error (NotFound) at Start;
  // true: wait for it to appear (logged every few seconds).
  bool wait_for_model = false;
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  int threads = 4;
  absl::Duration poll = absl::Seconds(1);
  int max_request_rows = 4096;
  size_t max_request_bytes = size_t{16} << 20;
};

// One loaded version and what requests need with it.
struct ServedVersion {
  std::shared_ptr<const LoadedModel> model;
  std::unique_ptr<RequestRows> rows;
  absl::Time exported;  // model.json's modification time
};

class ModelServer {
 public:
  // Listens (/healthz answers at once, /readyz 503), then loads the model
  // when DIR holds one (an error if it cannot be read: the file and why),
  // else waits for one. NotFound when DIR does not exist and
  // !wait_for_model; the port's error when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<ModelServer>> Start(ServeOptions options);
  ~ModelServer();
  ModelServer(const ModelServer&) = delete;
  ModelServer& operator=(const ModelServer&) = delete;

  int port() const { return http_->port(); }
  std::string url() const { return http_->url(); }
  // The version being served (null before the first).
  std::shared_ptr<const ServedVersion> current() const;
  // Looks at the folder now, loading a new version if there is one; the
  // watcher does this every `poll`. Returns the load's error, if any.
  absl::Status CheckForNewVersion();
  // Stops listening and the watcher; idempotent.
  void Stop();

 private:
  explicit ModelServer(ServeOptions options);
  http::HttpResponse Predict(const http::HttpRequest& request);
  http::HttpResponse Healthz() const;
  http::HttpResponse Readyz() const;
  void Watch();
  // Why no version is served yet (for /readyz, /healthz), and a log line
  // saying so every few seconds while it stays so.
  void SetNotReady(std::string reason, bool log) ABSL_EXCLUSIVE_LOCKS_REQUIRED(check_mu_);
  void RegisterMetrics();

  ServeOptions options_;
  metrics::Registry registry_;
  std::unique_ptr<http::HttpServer> http_;
  std::thread watcher_;
  absl::Notification stop_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const ServedVersion> current_ ABSL_GUARDED_BY(mu_);
  std::string not_ready_ ABSL_GUARDED_BY(mu_);  // why current_ is null

  // A versioned export folder (serve/model_versions.h): the deltas after
  // the version served are applied to the standby copy (the previous
  // version, once no request holds it), which is then swapped in; the old
  // one becomes the standby, behind by those deltas (double buffering).
  absl::Status CheckVersionedFolder();
  // Publishes `model` (built or updated by the caller) as the version served.
  void Publish(std::shared_ptr<LoadedModel> model, RequestRows rows, absl::Time exported);
  // The standby copy, caught up to the version served and free of readers:
  // the previous version when no request holds it within a bound, else a
  // new copy. Null (with the error logged) when neither works.
  absl::StatusOr<std::shared_ptr<LoadedModel>> TakeStandby();

  absl::Mutex check_mu_;  // one CheckForNewVersion at a time
  std::shared_ptr<LoadedModel> live_ ABSL_GUARDED_BY(check_mu_);     // current_'s model
  std::shared_ptr<LoadedModel> standby_ ABSL_GUARDED_BY(check_mu_);  // the other buffer
  std::vector<std::shared_ptr<const SavedModel>> standby_behind_ ABSL_GUARDED_BY(check_mu_);
  std::string loaded_signature_ ABSL_GUARDED_BY(check_mu_);  // model.json's inode, mtime, size
  std::string failed_signature_ ABSL_GUARDED_BY(check_mu_);
  absl::Time waiting_logged_ ABSL_GUARDED_BY(check_mu_) = absl::InfinitePast();

  metrics::Family<metrics::Counter>* requests_ = nullptr;  // by code
  metrics::Counter* rows_ = nullptr;
  metrics::Histogram* latency_ = nullptr;
  metrics::Family<metrics::Counter>* loads_ = nullptr;  // by result
};

}  // namespace pstrain::worker
