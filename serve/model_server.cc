#include "serve/model_server.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status.h"
#include "serve/model_versions.h"

namespace pstrain::worker {
namespace {

using Clock = std::chrono::steady_clock;

// JSON text of `j`; bytes of user data that are not UTF-8 become U+FFFD.
std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

http::HttpResponse JsonError(int status, absl::string_view message) {
  http::HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = Dump(nlohmann::json{{"error", std::string(message)}}) + "\n";
  return r;
}

// How often a server still waiting for its first model says so.
constexpr absl::Duration kWaitLogEvery = absl::Seconds(5);

int HttpCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

// Identifies the file's current content cheaply: inode, mtime, size; ""
// when there is none. `*mtime` is its modification time.
std::string Signature(const std::string& path, absl::Time* mtime) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return "";
  *mtime = absl::TimeFromTimespec(st.st_mtim);
  return absl::StrCat(st.st_ino, ":", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":", st.st_size);
}

}  // namespace

ModelServer::ModelServer(ServeOptions options) : options_(std::move(options)) {}

absl::StatusOr<std::unique_ptr<ModelServer>> ModelServer::Start(ServeOptions options) {
  if (options.model_dir.empty()) return absl::InvalidArgumentError("no model folder given");
  std::error_code ec;
  if (!options.wait_for_model && !std::filesystem::exists(options.model_dir, ec)) {
    return absl::NotFoundError(absl::StrCat("model folder ", options.model_dir, " does not exist"));
  }
  std::unique_ptr<ModelServer> s(new ModelServer(std::move(options)));
  s->RegisterMetrics();
  {
    absl::MutexLock lock(&s->mu_);
    s->not_ready_ = absl::StrCat("loading the model in ", s->options_.model_dir);
  }
  // Listen first: /healthz answers while a large model loads, /readyz says
  // when it is loaded.
  http::HttpServerOptions ho;
  ho.host = s->options_.host;
  ho.port = s->options_.port;
  ho.threads = s->options_.threads;
  ho.max_body_bytes = s->options_.max_request_bytes;
  s->http_ = std::make_unique<http::HttpServer>(ho);
  ModelServer* self = s.get();
  s->http_->RoutePost("/predict", [self](const http::HttpRequest& r) { return self->Predict(r); });
  s->http_->Route("/healthz", [self](const http::HttpRequest&) { return self->Healthz(); });
  s->http_->Route("/readyz", [self](const http::HttpRequest&) { return self->Readyz(); });
  s->http_->Route("/metrics", [self](const http::HttpRequest&) {
    http::HttpResponse r;
    r.content_type = std::string(metrics::Registry::kContentType);
    r.body = self->registry_.Render();
    return r;
  });
  PS_RETURN_IF_ERROR(s->http_->Start());
  spdlog::info("listening on {}: /healthz answers now, /readyz once a model from {} is loaded",
               s->http_->url(), s->options_.model_dir);
  // A model there at the start must load: its error is the answer.
  // (Replaced while read: the watcher loads the new one.)
  if (absl::Status st = s->CheckForNewVersion(); !st.ok() && !absl::IsUnavailable(st)) {
    s->Stop();
    return st;
  }
  s->watcher_ = std::thread([self] { self->Watch(); });
  return s;
}

ModelServer::~ModelServer() { Stop(); }

void ModelServer::Stop() {
  if (http_) http_->Stop();
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watcher_.joinable()) watcher_.join();
}

void ModelServer::RegisterMetrics() {
  requests_ = registry_.AddCounter("pstrain_serve_requests_total",
                                   "Prediction requests answered, by HTTP status code.", {"code"});
  rows_ = registry_.GetCounter("pstrain_serve_rows_total", "Rows scored.");
  latency_ = registry_
                 .AddHistogram("pstrain_serve_request_seconds",
                               "Time to answer a prediction request (parse, score, format).", {},
                               metrics::LatencyBuckets())
                 ->Get({});
  loads_ = registry_.AddCounter("pstrain_serve_model_loads_total",
                                "Model versions loaded whole (ok), brought up to date by deltas (delta) or refused "
                                "(failed).",
                                {"result"});
  metrics::Gauge* step = registry_.GetGauge("pstrain_serve_model_step",
                                            "Training step of the model version served.");
  metrics::Gauge* age = registry_.GetGauge(
      "pstrain_serve_model_age_seconds", "Seconds since the version served was exported.");
  metrics::Gauge* rows = registry_.GetGauge("pstrain_serve_model_rows",
                                            "Embedding rows of the version served.");
  metrics::Family<metrics::Gauge>* info = registry_.AddGauge(
      "pstrain_serve_model_info", "1 for the version served (its manifest checksum).", {"version"});
  registry_.AddScrapeHook([this, step, age, rows, info] {
    std::shared_ptr<const ServedVersion> v = current();
    if (!v) return;
    step->Set(static_cast<double>(v->model->step()));
    age->Set(absl::ToDoubleSeconds(absl::Now() - v->exported));
    rows->Set(static_cast<double>(v->model->sparse_rows()));
    info->Get({v->model->version()})->Set(1);
  });
}

std::shared_ptr<const ServedVersion> ModelServer::current() const {
  absl::MutexLock lock(&mu_);
  return current_;
}

absl::Status ModelServer::CheckForNewVersion() {
  absl::MutexLock lock(&check_mu_);
  if (IsVersionedExport(options_.model_dir)) return CheckVersionedFolder();
  const std::string manifest = options_.model_dir + "/model.json";
  absl::Time mtime;
  const std::string signature = Signature(manifest, &mtime);
  if (signature.empty()) {
    if (current() == nullptr) {
      std::error_code ec;
      SetNotReady(std::filesystem::is_directory(options_.model_dir, ec)
                      ? absl::StrCat("no model in ", options_.model_dir, " yet (no model.json)")
                      : absl::StrCat(options_.model_dir, " does not exist yet"),
                  /*log=*/true);
    }
    return absl::OkStatus();
  }
  if (signature == loaded_signature_ || signature == failed_signature_) return absl::OkStatus();
  if (current() == nullptr) {
    SetNotReady(absl::StrCat("loading the model in ", options_.model_dir), /*log=*/false);
  }
  const absl::Time t0 = absl::Now();
  absl::StatusOr<std::shared_ptr<LoadedModel>> model = LoadedModel::Load(options_.model_dir);
  absl::StatusOr<RequestRows> rows =
      model.ok() ? RequestRows::Create((*model)->schema()) : absl::StatusOr<RequestRows>(model.status());
  if (!rows.ok()) {
    loads_->Get({"failed"})->Inc();
    std::shared_ptr<const ServedVersion> old = current();
    // Replaced while read: the next look finds the new version whole.
    if (!absl::IsUnavailable(rows.status())) failed_signature_ = signature;
    spdlog::warn("{}: not loaded: {}{}", options_.model_dir, std::string(rows.status().message()),
                 old ? absl::StrCat("; still serving version ", old->model->version(), " (step ",
                                    old->model->step(), ")")
                     : std::string("; no version to serve yet"));
    if (!old) {
      SetNotReady(absl::StrCat("the model in ", options_.model_dir,
                               " did not load: ", rows.status().message()),
                  /*log=*/false);
    }
    return rows.status();
  }
  Publish(*std::move(model), *std::move(rows), mtime);
  std::shared_ptr<const ServedVersion> v = current();
  standby_.reset();
  standby_behind_.clear();
  loaded_signature_ = signature;
  failed_signature_.clear();
  loads_->Get({"ok"})->Inc();
  spdlog::info("serving model version {} (step {}, {} embedding rows) from {}, exported {:.1f}s ago, "
               "loaded in {:.2f}s",
               v->model->version(), v->model->step(), v->model->sparse_rows(), options_.model_dir,
               absl::ToDoubleSeconds(absl::Now() - mtime), absl::ToDoubleSeconds(absl::Now() - t0));
  return absl::OkStatus();
}

void ModelServer::Publish(std::shared_ptr<LoadedModel> model, RequestRows rows,
                          absl::Time exported) {
  auto v = std::make_shared<ServedVersion>();
  v->model = model;
  v->rows = std::make_unique<RequestRows>(std::move(rows));
  v->exported = exported;
  live_ = std::move(model);
  absl::MutexLock l(&mu_);
  current_ = std::move(v);
}

absl::StatusOr<std::shared_ptr<LoadedModel>> ModelServer::TakeStandby() {
  // Requests hold a version for the microseconds of one scoring call.
  constexpr absl::Duration kReadersBound = absl::Seconds(2);
  if (standby_) {
    const absl::Time until = absl::Now() + kReadersBound;
    while (standby_.use_count() > 1 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(1));
    if (standby_.use_count() == 1) {
      std::atomic_thread_fence(std::memory_order_acquire);  // the readers' last uses
      std::shared_ptr<LoadedModel> s = std::move(standby_);
      for (const auto& d : standby_behind_) {
        if (absl::Status st = s->ApplyDelta(*d); !st.ok()) {
          spdlog::warn("{}: the standby copy could not catch up ({}): copying the version served",
                       options_.model_dir, std::string(st.message()));
          s.reset();
          break;
        }
      }
      standby_behind_.clear();
      if (s) return s;
    } else {
      spdlog::warn("{}: requests still hold the previous version after {}: copying the version "
                   "served instead",
                   options_.model_dir, absl::FormatDuration(kReadersBound));
    }
    standby_.reset();
    standby_behind_.clear();
  }
  return live_->Clone();
}

absl::Status ModelServer::CheckVersionedFolder() {
  const std::string& dir = options_.model_dir;
  absl::Time mtime;
  const std::string signature = Signature(dir + "/LATEST", &mtime);
  if (signature.empty() || signature == loaded_signature_ || signature == failed_signature_) {
    return absl::OkStatus();
  }
  const absl::Time t0 = absl::Now();
  std::shared_ptr<const ServedVersion> old = current();
  if (!old) SetNotReady(absl::StrCat("loading the model in ", dir), /*log=*/false);
  auto refuse = [&](const absl::Status& why) {
    loads_->Get({"failed"})->Inc();
    if (!absl::IsUnavailable(why) && !absl::IsNotFound(why)) failed_signature_ = signature;
    spdlog::warn("{}: not loaded: {}{}", dir, std::string(why.message()),
                 old ? absl::StrCat("; still serving version ", old->model->version(), " (step ",
                                    old->model->step(), ")")
                     : std::string("; no version to serve yet"));
    if (!old) SetNotReady(absl::StrCat("the model in ", dir, " did not load: ", why.message()), false);
    return why;
  };
  absl::StatusOr<uint64_t> seq = ReadLatest(dir);
  if (!seq.ok()) return refuse(seq.status());
  absl::StatusOr<ExportInfo> info = ReadVersionInfo(dir, *seq);
  if (!info.ok()) return refuse(info.status());
  std::shared_ptr<LoadedModel> model;
  int deltas = 0;
  if (live_ && live_->exported().seq > 0 && live_->exported().base == info->base &&
      live_->exported().seq < *seq) {
    // The deltas after the version served: read (checksums verified) before
    // anything is applied, then applied to the standby copy.
    std::vector<std::shared_ptr<const SavedModel>> read;
    for (uint64_t s = live_->exported().seq + 1; s <= *seq; ++s) {
      absl::StatusOr<SavedModel> d = ReadVersion(dir, s);
      if (!d.ok()) return refuse(d.status());
      read.push_back(std::make_shared<const SavedModel>(*std::move(d)));
    }
    absl::StatusOr<std::shared_ptr<LoadedModel>> standby = TakeStandby();
    if (!standby.ok()) return refuse(standby.status());
    for (const auto& d : read) {
      if (absl::Status st = (*standby)->ApplyDelta(*d); !st.ok()) return refuse(st);
    }
    model = *std::move(standby);
    standby_ = live_;  // the previous version, behind by `read`
    standby_behind_ = std::move(read);
    deltas = static_cast<int>(standby_behind_.size());
  } else {
    absl::StatusOr<std::shared_ptr<LoadedModel>> loaded = LoadedModel::Load(dir);
    if (!loaded.ok()) return refuse(loaded.status());
    model = *std::move(loaded);
    standby_.reset();
    standby_behind_.clear();
  }
  absl::StatusOr<RequestRows> rows = RequestRows::Create(model->schema());
  if (!rows.ok()) return refuse(rows.status());
  const absl::Time exported = model->exported().exported_unix_ms > 0
                                  ? absl::FromUnixMillis(model->exported().exported_unix_ms)
                                  : mtime;
  Publish(model, *std::move(rows), exported);
  loaded_signature_ = signature;
  failed_signature_.clear();
  loads_->Get({deltas > 0 ? "delta" : "ok"})->Inc();
  spdlog::info("serving model version {} (step {}, {} embedding rows) from {}, exported {:.2f}s "
               "ago, {} in {:.3f}s",
               model->version(), model->step(), model->sparse_rows(), dir,
               absl::ToDoubleSeconds(absl::Now() - exported),
               deltas > 0 ? absl::StrCat(deltas, deltas == 1 ? " delta" : " deltas", " applied")
                          : std::string("loaded"),
               absl::ToDoubleSeconds(absl::Now() - t0));
  return absl::OkStatus();
}

void ModelServer::Watch() {
  while (!stop_.WaitForNotificationWithTimeout(options_.poll)) {
    (void)CheckForNewVersion();  // logged there
  }
}

void ModelServer::SetNotReady(std::string reason, bool log) {
  if (log && absl::Now() - waiting_logged_ >= kWaitLogEvery) {
    spdlog::info("waiting for a model: {}", reason);
    waiting_logged_ = absl::Now();
  }
  absl::MutexLock lock(&mu_);
  not_ready_ = std::move(reason);
}

http::HttpResponse ModelServer::Healthz() const {
  std::shared_ptr<const ServedVersion> v = current();
  http::HttpResponse r;
  if (!v) {
    absl::MutexLock lock(&mu_);
    r.body = absl::StrCat("ok: no model yet: ", not_ready_, "\n");
    return r;
  }
  r.body = absl::StrCat("ok: serving version ", v->model->version(), " (step ", v->model->step(),
                        ")\n");
  return r;
}

http::HttpResponse ModelServer::Readyz() const {
  std::shared_ptr<const ServedVersion> v = current();
  http::HttpResponse r;
  r.content_type = "application/json";
  if (!v) {
    absl::MutexLock lock(&mu_);
    r.status = 503;
    r.body = Dump(nlohmann::json{{"ready", false}, {"reason", not_ready_}}) + "\n";
    return r;
  }
  r.body = Dump(nlohmann::json{{"ready", true},
                               {"model_version", v->model->version()},
                               {"model_step", v->model->step()}}) +
           "\n";
  return r;
}

http::HttpResponse ModelServer::Predict(const http::HttpRequest& request) {
  const Clock::time_point t0 = Clock::now();
  auto answer = [&](http::HttpResponse r) {
    requests_->Get({absl::StrCat(r.status)})->Inc();
    latency_->Observe(std::chrono::duration<double>(Clock::now() - t0).count());
    return r;
  };
  std::shared_ptr<const ServedVersion> v = current();
  if (!v) {
    return answer(JsonError(503, absl::StrCat("no model loaded yet from ", options_.model_dir)));
  }
  std::string_view body = request.body;
  size_t first = body.find_first_not_of(" \t\r\n");
  const bool json = absl::StrContains(request.content_type, "json") ||
                    (first != std::string_view::npos && body[first] == '{');
  absl::StatusOr<RequestBatch> rows =
      json ? v->rows->ParseJson(body, options_.max_request_rows)
           : v->rows->ParseText(body, options_.max_request_rows);
  if (!rows.ok()) return answer(JsonError(HttpCode(rows.status()), rows.status().message()));
  const Batch& batch = *rows->batch;

  absl::StatusOr<std::unique_ptr<ScoreScratch>> scratch = v->model->AcquireScratch();
  if (!scratch.ok()) return answer(JsonError(500, scratch.status().message()));
  std::vector<float> probs;
  absl::Status s = v->model->Score(batch, scratch->get(), &probs);
  v->model->ReleaseScratch(*std::move(scratch));
  if (!s.ok()) return answer(JsonError(HttpCode(s), s.message()));
  const std::vector<ModelHead>& heads = v->model->heads();
  const size_t num_heads = heads.size();
  rows_->Inc(static_cast<double>(batch.size));

  http::HttpResponse r;
  r.content_type = "application/json";
  std::string& out = r.body;
  out.reserve(96 + probs.size() * 12 + num_heads * 32);
  // Column h of probs ([rows x heads]) as a JSON list.
  const auto append_head = [&out, &probs, num_heads](size_t h) {
    char buf[32];
    out += '[';
    for (size_t i = h; i < probs.size(); i += num_heads) {
      if (i > h) out += ',';
      auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), probs[i]);
      out.append(buf, ec == std::errc() ? end : buf);
    }
    out += ']';
  };
  absl::StrAppend(&out, "{\"model_version\":\"", v->model->version(), "\",\"model_step\":",
                  v->model->step(), ",\"probabilities\":");
  append_head(0);  // the first head's: what a client of a one-head model reads
  if (num_heads > 1) {
    // Every head's by name: a probability, or a regression head's value.
    out += ",\"heads\":{";
    for (size_t h = 0; h < num_heads; ++h) {
      absl::StrAppend(&out, h > 0 ? "," : "", Dump(nlohmann::json(heads[h].name)), ":");
      append_head(h);
    }
    out += '}';
  }
  if (!rows->warnings.empty()) {
    absl::StrAppend(&out, ",\"warnings\":", Dump(nlohmann::json(rows->warnings)));
  }
  out += "}\n";
  return answer(std::move(r));
}

}  // namespace pstrain::worker
