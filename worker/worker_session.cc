#include "worker/worker_session.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cluster/node_info.h"
#include "common/process.h"
#include "common/status.h"
#include "worker/train_metrics.h"

namespace pstrain::worker {
namespace {

std::vector<std::string> ServerEndpoints(const proto::ClusterView& view) {
  std::vector<std::string> servers;
  for (const auto& s : view.servers) servers.push_back(s.endpoint);
  return servers;
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Start(WorkerSessionOptions options) {
  if (!options.make_transport) {
    return absl::InvalidArgumentError("WorkerSessionOptions::make_transport is not set");
  }
  std::unique_ptr<WorkerSession> s(new WorkerSession(std::move(options)));
  PS_RETURN_IF_ERROR(s->StartNode());
  PS_RETURN_IF_ERROR(s->Join());
  return s;
}

WorkerSession::~WorkerSession() {
  if (coordinator_ != nullptr) coordinator_->StopHeartbeats();
  if (node_ != nullptr) node_->Stop();
}

absl::Status WorkerSession::StartNode() {
  node_ = std::make_unique<RpcNode>(options_.make_transport());
  PS_ASSIGN_OR_RETURN(std::string bound, node_->Bind(options_.bind));
  endpoint_ = AdvertisedEndpoint(bound, options_.advertise_host);
  return node_->Start([this](RpcRequest&& req) { Handle(std::move(req)); });
}

absl::Status WorkerSession::Join() {
  CoordinatorClientOptions co;
  co.coordinator = options_.coordinator;
  co.role = proto::Role::kWorker;
  co.requested_rank = options_.rank;
  co.endpoint = endpoint_;
  co.connect_timeout = options_.connect_timeout;
  co.node_id = options_.node_id;
  co.reconnect_timeout = options_.coordinator_timeout;
  co.on_gave_up = [this](const absl::Status& why) {
    // The coordinator is gone for good: end like on its Shutdown.
    if (options_.on_shutdown) options_.on_shutdown(why);
    stopped_ = true;
    node_->Fence(kNoPeer, why);
  };
  coordinator_ = std::make_unique<CoordinatorClient>(node_.get(), co);
  coordinator_peer_ = coordinator_->peer();
  client_ = coordinator_.get();
  PS_ASSIGN_OR_RETURN(proto::ClusterView first, coordinator_->Register());
  rank_ = first.your_rank;
  std::function<proto::Heartbeat()> fill;
  if (TrainMetrics* tm = options_.train_metrics; tm != nullptr) {
    fill = [tm] {
      proto::Heartbeat hb;
      tm->FillHeartbeat(&hb);
      return hb;
    };
  }
  coordinator_->StartHeartbeats(absl::Milliseconds(first.heartbeat_interval_ms), std::move(fill));
  PS_ASSIGN_OR_RETURN(view_, coordinator_->WaitForCluster(options_.cluster_timeout));
  return absl::OkStatus();
}

void WorkerSession::Handle(RpcRequest&& req) {
  auto d = proto::Decode(req.message);
  if (!d.ok()) {
    node_->Reply(req, proto::EncodeError(proto::Role::kWorker, -1, d.status()));
    return;
  }
  switch (d->type()) {
    case proto::MsgType::kPing: {
      // Unhealthy while its coordinator is lost.
      CoordinatorClient* c = client_.load();
      absl::Status st = c != nullptr ? c->CoordinatorStatus() : absl::OkStatus();
      node_->Reply(req, st.ok() ? proto::EncodeOk(proto::Role::kWorker, -1)
                                : proto::EncodeError(proto::Role::kWorker, -1, st));
      return;
    }
    case proto::MsgType::kShutdown:
      OnShutdown(*d, req);
      return;
    case proto::MsgType::kRecover:
      OnRecover(*d, req);
      return;
    default:
      if (options_.on_request && options_.on_request(node_.get(), *d, req)) return;
      node_->Reply(req, proto::EncodeError(
                            proto::Role::kWorker, -1,
                            absl::UnimplementedError("workers serve no such requests")));
  }
}

void WorkerSession::OnRecover(const proto::Decoded& d, const RpcRequest& req) {
  auto notice = d.body<proto::RecoverNotice>();
  if (!notice.ok()) {
    node_->Reply(req, proto::EncodeError(proto::Role::kWorker, -1, notice.status()));
    return;
  }
  // A late notice (that recovery is over) or one after Shutdown changes
  // nothing. Otherwise: stop talking to the servers now; what is in flight
  // fails, and so does anything sent before the recovery ends.
  if (notice->epoch > current_.load() && !stopped_.load()) {
    announced_ = std::max(announced_.load(), notice->epoch);
    absl::Status why = absl::AbortedError(
        absl::StrCat("cluster recovering (epoch ", notice->epoch, "): ", notice->reason));
    node_->Fence(coordinator_peer_.load(), why);
    if (options_.on_rollback) options_.on_rollback(why);
  }
  node_->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
}

void WorkerSession::OnShutdown(const proto::Decoded& d, const RpcRequest& req) {
  node_->Reply(req, proto::EncodeOk(proto::Role::kWorker, -1));
  const absl::Status why = proto::RemoteStatus(d.header());
  spdlog::error("stopped by the coordinator: {}", why.ToString());
  if (CoordinatorClient* c = client_.load(); c != nullptr) c->StopHeartbeats();
  if (options_.on_shutdown) options_.on_shutdown(why);
  stopped_ = true;
  // Every call fails now, the coordinator's too: the job is over.
  node_->Fence(kNoPeer, why.ok() ? absl::CancelledError("the coordinator stopped the job")
                                 : Annotate(why, "the coordinator stopped the job"));
}

absl::StatusOr<proto::TableLayout> WorkerSession::DefineTables(const std::vector<TableSpec>& tables) {
  return coordinator_->DefineTables(tables, options_.tables_timeout);
}

void WorkerSession::Connect(proto::TableLayout layout) {
  current_ = layout.epoch;
  KvClientOptions ko = options_.kv;
  ko.rank = rank_;
  kv_ = std::make_unique<KvClient>(node_.get(), std::move(layout), ServerEndpoints(view_), ko);
}

absl::Status WorkerSession::RunWithRecovery(const std::function<absl::Status()>& attempt,
                                            const RecoveryHooks& hooks) {
  const std::string prefix = hooks.who.empty() ? std::string() : hooks.who + ": ";
  while (true) {
    absl::Status st = attempt();
    if (st.ok()) return st;
    if (hooks.after_failure) hooks.after_failure();
    absl::StatusOr<proto::Recovered> recovered = AwaitRecovery(hooks.untold_needs_checkpoints);
    if (!recovered.ok()) {
      absl::Status final_error = hooks.who.empty() ? st : Annotate(st, hooks.who);
      if (hooks.on_give_up) hooks.on_give_up(final_error);
      ArmExitWatchdog(1);
      return final_error;
    }
    if (hooks.on_recovered) hooks.on_recovered();
    spdlog::warn("{}training interrupted ({}); the cluster recovered: resuming from step {} "
                 "(epoch {})",
                 prefix, st.ToString(), std::max<int64_t>(0, recovered->layout.restored_step),
                 recovered->epoch);
    Reconnect(*std::move(recovered));
  }
}

absl::StatusOr<proto::Recovered> WorkerSession::AwaitRecovery(bool untold_needs_checkpoints) {
  if (stopped_.load()) return absl::UnavailableError("the coordinator stopped the job");
  const uint64_t epoch = current_.load();
  const bool told = announced_.load() > epoch;
  const proto::TableLayout& layout = kv_->layout();
  const bool checkpoints = layout.checkpoint_step >= 0 || layout.restored_step >= 0;
  if (!told && untold_needs_checkpoints && !checkpoints) {
    return absl::UnavailableError("no recovery: the job takes no checkpoints");
  }
  auto recovered = coordinator_->WaitForRecovery(
      epoch, told ? options_.recovery_timeout : options_.untold_recovery_wait);
  if (!recovered.ok() && recovered.status().code() != absl::StatusCode::kUnavailable) {
    spdlog::error("waiting for the cluster's recovery failed: {}", recovered.status().ToString());
  }
  return recovered;
}

void WorkerSession::Reconnect(proto::Recovered recovered) {
  current_ = recovered.epoch;
  kv_.reset();
  node_->Unfence();
  if (rolling_back()) {
    // Rolling back again already: keep away from the servers.
    node_->Fence(coordinator_peer_.load(), absl::AbortedError("the cluster is rolling back again"));
  }
  KvClientOptions ko = options_.kv;
  ko.rank = rank_;
  kv_ = std::make_unique<KvClient>(node_.get(), std::move(recovered.layout),
                                   ServerEndpoints(recovered.view), ko);
}

absl::Status WorkerSession::Finish() {
  // Told before the exit watchdog is armed: a coordinator lost right now is
  // waited for (up to coordinator_timeout), so a restarted one learns it.
  absl::Status done = coordinator_->WorkerDone();
  // The work is done: a stuck teardown must not hold the job up.
  ArmExitWatchdog(done.ok() ? 0 : 1);
  PS_RETURN_IF_ERROR(done);
  coordinator_->StopHeartbeats();
  node_->Stop();
  return absl::OkStatus();
}

void WorkerSession::ArmExitWatchdog(int exit_code) const {
  if (options_.exit_watchdog) ExitWithin(options_.exit_grace, exit_code);
}

}  // namespace pstrain::worker
