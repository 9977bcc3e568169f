// The coordinator's core: its life, the requests, membership and
// liveness, and the end of the job. coordinator_register.cc: registration
// and ranks; coordinator_epochs.cc: the tables and the rollbacks to a new
// epoch; coordinator_resume.cc: the journal and taking a job back.
#include "server/coordinator/coordinator.h"

#include "cluster/job_fetch.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cluster/node_info.h"

namespace pstrain::server {

using proto::Decoded;
using proto::MsgType;
using proto::Role;

namespace {
// What a barrier waits when its request names no deadline (header step 0,
// as CoordinatorClient::Barrier sends); the caller's own deadline still
// ends its wait first when it is shorter.
constexpr absl::Duration kDefaultBarrierWait = absl::Minutes(10);
// The longest gap between two checks of heartbeats and deadlines: expired
// waits are answered, and dead nodes found, this late at most.
constexpr absl::Duration kMaxTickPeriod = absl::Milliseconds(500);
// A node answers kShutdown at once; one that has not within this is gone,
// and the job ends without its answer.
constexpr absl::Duration kShutdownTimeout = absl::Seconds(2);
// After a job ends well the coordinator goes on answering this long: a
// worker whose "done" reply was lost as the job ended asks again (within
// 250 ms, cluster/coordinator_client.cc) and hears it, instead of waiting
// for a coordinator that has gone.
constexpr absl::Duration kFinishLinger = absl::Milliseconds(800);

ObservabilityOptions ObservabilityFor(const CoordinatorOptions& options,
                                      const std::string& endpoint) {
  ObservabilityOptions o;
  ClusterMonitorOptions& mo = o.monitor;
  mo.num_servers = options.num_servers;
  mo.num_workers = options.num_workers;
  mo.consistency = ConsistencyName(options.consistency);
  mo.staleness = options.staleness;
  mo.heartbeat_interval = options.heartbeat_interval;
  mo.heartbeat_timeout = options.heartbeat_timeout;
  mo.coordinator_endpoint = endpoint;
  o.metrics_port = options.metrics_port;
  o.dashboard_port = options.dashboard_port;
  o.http_host = options.http_host;
  return o;
}
}  // namespace

absl::StatusOr<std::unique_ptr<Coordinator>> Coordinator::Create(
    CoordinatorOptions options, std::unique_ptr<Transport> transport) {
  if (options.num_servers < 1 || options.num_workers < 1) {
    return absl::InvalidArgumentError("need at least one server and one worker");
  }
  auto node = std::make_unique<RpcNode>(std::move(transport));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  std::unique_ptr<Coordinator> c(new Coordinator(std::move(options), std::move(node), endpoint));
  Coordinator* self = c.get();
  PS_ASSIGN_OR_RETURN(self->observability_,
                      Observability::Start(ObservabilityFor(self->options_, self->endpoint_)));
  self->checkpoints_ = std::make_unique<CheckpointCoordinator>(
      self->options_.checkpoint, self->options_.num_workers, static_cast<ClusterLink*>(self),
      &self->store_, self->monitor());
  PS_RETURN_IF_ERROR(self->checkpoints_->LoadRestore());
  PS_RETURN_IF_ERROR(self->OpenJournal());
  if (!self->options_.job_spec.empty()) {
    self->store_.Set(kJobSpecKey, Buffer::FromString(std::string(self->options_.job_spec)));
  }
  PS_RETURN_IF_ERROR(self->node_->Start([self](RpcRequest&& req) { self->Handle(std::move(req)); }));
  self->node_->transport().Post([self] { self->Tick(); });
  return c;
}

Coordinator::Coordinator(CoordinatorOptions options, std::unique_ptr<RpcNode> node,
                         std::string endpoint)
    : options_(std::move(options)),
      node_(std::move(node)),
      endpoint_(std::move(endpoint)),
      started_(absl::Now()),
      servers_(options_.num_servers),
      workers_(options_.num_workers),
      elastic_(std::make_unique<ElasticWorkers>(options_.elastic_workers, options_.num_workers,
                                                static_cast<ClusterLink*>(this), &store_)),
      recovery_(std::make_unique<ServerRecovery>(options_.recovery_timeout,
                                                 static_cast<ClusterLink*>(this))) {}

Coordinator::~Coordinator() {
  if (observability_) observability_->StopServing();
  node_->Stop();
}

absl::Status Coordinator::Run() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&finished_));
  return result_;
}

void Coordinator::RequestStop() {
  node_->transport().Post([this] { Finish(absl::CancelledError("coordinator stopped")); });
}

PeerId Coordinator::server_peer(int rank) const {
  const std::optional<Member>& s = servers_[rank];
  return s ? s->peer : kNoPeer;
}

void Coordinator::ReplyError(const RpcRequest& req, const absl::Status& status) {
  node_->Reply(req, CoordinatorError(status));
}

void Coordinator::ReplyOk(const RpcRequest& req) {
  node_->Reply(req, proto::EncodeOk(Role::kCoordinator, 0));
}

void Coordinator::Handle(RpcRequest&& req) {
  absl::StatusOr<Decoded> d = proto::Decode(req.message);
  if (!d.ok()) {
    spdlog::warn("coordinator: dropped a malformed request: {}", d.status().ToString());
    ReplyError(req, d.status());
    return;
  }
  if (resuming_ && d->type() != MsgType::kRegister && d->type() != MsgType::kHeartbeat &&
      d->type() != MsgType::kPing) {
    // Answered once every known node is back (coordinator_resume.cc). From
    // a node not registered again yet: dropped unanswered, the node
    // re-issues it once it is.
    if (FindMember(d->header().sender_role, d->header().sender_rank) != nullptr) {
      deferred_.push_back(std::move(req));
    }
    return;
  }
  switch (d->type()) {
    case MsgType::kRegister: return OnRegister(*d, req);
    case MsgType::kGetCluster: return OnGetCluster(*d, req);
    case MsgType::kDefineTables: return OnDefineTables(*d, req);
    case MsgType::kHeartbeat: return OnHeartbeat(*d, req);
    case MsgType::kBarrier: return OnBarrier(*d, req);
    case MsgType::kStoreSet: return OnStoreSet(*d, req);
    case MsgType::kStoreGet: return OnStoreGet(*d, req);
    case MsgType::kWorkerDone: return OnWorkerDone(*d, req);
    case MsgType::kPing: return ReplyOk(req);
    case MsgType::kCheckpointArrive: return OnCheckpointArrive(*d, req);
    case MsgType::kWaitRecovery: return OnWaitRecovery(*d, req);
    case MsgType::kClaimShard: return OnClaimShard(*d, req);
    case MsgType::kRejoin: return OnRejoin(*d, req);
    default:
      ReplyError(req, absl::UnimplementedError(absl::StrCat(
                          "coordinator does not serve ", proto::MsgTypeName(d->type()))));
  }
}

Coordinator::Member* Coordinator::FindMember(Role role, int32_t rank) {
  auto& slots = role == Role::kServer ? servers_ : workers_;
  if (role != Role::kServer && role != Role::kWorker) return nullptr;
  if (rank < 0 || rank >= static_cast<int32_t>(slots.size()) || !slots[rank]) return nullptr;
  return &*slots[rank];
}

bool Coordinator::AllJoined() const {
  for (const auto& s : servers_) if (!s) return false;
  for (const auto& w : workers_) if (!w) return false;
  return true;
}

proto::ClusterView Coordinator::View(int32_t rank) const {
  proto::ClusterView v;
  v.your_rank = rank;
  v.num_servers = options_.num_servers;
  v.num_workers = options_.num_workers;
  v.heartbeat_interval_ms = absl::ToInt64Milliseconds(options_.heartbeat_interval);
  v.epoch = epoch_;
  v.journaled = journal_ != nullptr;
  if (AllJoined()) {
    for (const auto& s : servers_) v.servers.push_back(s->info);
    for (const auto& w : workers_) v.workers.push_back(w->info);
  }
  return v;
}

void Coordinator::OnHeartbeat(const Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(d.header().sender_role, d.header().sender_rank);
  if (m == nullptr) {
    return ReplyError(req, absl::NotFoundError("heartbeat from a node that is not registered"));
  }
  m->last_seen = absl::Now();
  if (!m->alive) {
    spdlog::warn("{} is heard from again", MemberName(m->info.role, m->info.rank));
    m->alive = true;
    monitor()->OnAlive(m->info.role, m->info.rank);
    if (recovery_->active() && m->info.role == Role::kServer) {
      // It was frozen, not gone: it rolls back with the others.
      SendRecover(m);
    }
  }
  // The body is for the dashboard: a malformed one still proves liveness.
  if (auto hb = d.body<proto::Heartbeat>(); hb.ok()) {
    monitor()->OnHeartbeat(m->info.role, m->info.rank, *hb);
    if (m->info.role == Role::kWorker) elastic_->OnHeartbeat(m->info.rank, *hb);
  }
  ReplyOk(req);
}

void Coordinator::OnBarrier(const Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::BarrierRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (body->participants < 1) {
    return ReplyError(req, absl::InvalidArgumentError("barrier needs at least one participant"));
  }
  int participants = body->participants;
  if (options_.elastic_workers && participants == options_.num_workers) {
    participants -= elastic_->num_dropped();  // the dropped workers will not come
  }
  const absl::Duration wait =
      d.header().step > 0 ? absl::Milliseconds(d.header().step) : kDefaultBarrierWait;
  std::string route = req.route;
  uint64_t id = req.id;
  const std::string member = MemberName(d.header().sender_role, d.header().sender_rank);
  store_.EnterBarrier(body->name, member, participants, absl::Now() + wait,
                      [this, route, id, member, participants, name = body->name](bool complete) {
                        node_->Reply(route, id,
                                     complete ? proto::EncodeOk(Role::kCoordinator, 0)
                                              : CoordinatorError(absl::DeadlineExceededError(
                                                    BarrierWait(name, member, participants))));
                      });
}

std::string Coordinator::BarrierWait(const std::string& name, const std::string& asker,
                                     int participants) const {
  std::vector<std::string> in = store_.BarrierMembers(name);
  in.push_back(asker);  // its own entry just expired: it enters again
  std::vector<std::string> missing;
  for (int w = 0; w < options_.num_workers; ++w) {
    const std::string m = MemberName(Role::kWorker, w);
    if (std::find(in.begin(), in.end(), m) != in.end()) continue;
    if (options_.elastic_workers && elastic_->dropped(w)) continue;
    missing.push_back(absl::StrCat(m, " (", monitor()->Activity(Role::kWorker, w), ")"));
  }
  const int arrived = static_cast<int>(in.size());
  if (missing.empty() || arrived + static_cast<int>(missing.size()) != participants) {
    // Not a barrier of all workers: counts only.
    return absl::StrCat("barrier ", name, ": ", arrived, " of ", participants, " arrived");
  }
  return absl::StrCat("barrier ", name, ": ", arrived, " of ", participants, " arrived; waiting for ",
                      absl::StrJoin(missing, ", "));
}

void Coordinator::OnStoreSet(const Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::StoreRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (body->keys.size() != 1) return ReplyError(req, absl::InvalidArgumentError("one key per set"));
  if (absl::Status st = d.CheckPayload(0, proto::DType::kU8); !st.ok()) return ReplyError(req, st);
  store_.Set(body->keys[0], d.payload(0));
  ReplyOk(req);
}

void Coordinator::OnStoreGet(const Decoded& d, const RpcRequest& req) {
  auto body = d.body<proto::StoreRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (body->keys.size() != 1) return ReplyError(req, absl::InvalidArgumentError("one key per get"));
  std::string route = req.route;
  uint64_t id = req.id;
  std::string key = body->keys[0];
  store_.Get(key, absl::Now() + absl::Milliseconds(std::max<int64_t>(0, body->wait_ms)),
             [this, route, id, key, waited = body->wait_ms > 0](const Buffer* value) {
               if (value == nullptr) {
                 absl::Status st = waited ? absl::DeadlineExceededError("key " + key + " not set in time")
                                          : absl::NotFoundError("no key " + key);
                 node_->Reply(route, id, CoordinatorError(st));
                 return;
               }
               proto::Header h;
               h.type = MsgType::kReply;
               h.sender_role = Role::kCoordinator;
               node_->Reply(route, id, proto::EncodeHeaderOnly(h, {*value}, {proto::DType::kU8}));
             });
}

void Coordinator::OnWorkerDone(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("only workers finish"));
  }
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr) return ReplyError(req, absl::NotFoundError("unknown worker"));
  if (m->done) return ReplyOk(req);  // a repeat: its first reply was lost
  m->done = true;
  JournalMemberOf(*m);
  monitor()->OnWorkerDone(m->info.rank);
  ReplyOk(req);
  spdlog::info("worker {} finished", m->info.rank);
  MaybeEndJob();
}

void Coordinator::OnCheckpointArrive(const Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("checkpoint arrival from a non-worker"));
  }
  auto body = d.body<proto::CheckpointArrive>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (recovery_->active()) {
    return ReplyError(req, absl::AbortedError("the cluster is recovering from a failure"));
  }
  std::optional<Buffer> state;
  if (d.num_payloads() > 0) {
    if (absl::Status st = d.CheckPayload(0, proto::DType::kU8); !st.ok()) return ReplyError(req, st);
    state = d.payload(0);
  }
  checkpoints_->OnArrive(m->info.rank, *std::move(body), state ? &*state : nullptr,
                         {req.route, req.id});
}

void Coordinator::OnClaimShard(const Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker ||
      elastic_->dropped(m->info.rank)) {
    return ReplyError(req, absl::InvalidArgumentError("only live workers adopt shards"));
  }
  node_->Reply(req, CoordinatorReply(elastic_->Claim(m->info.rank)));
}

void Coordinator::OnRejoin(const Decoded& d, const RpcRequest& req) {
  Member* m = FindMember(Role::kWorker, d.header().sender_rank);
  if (m == nullptr || d.header().sender_role != Role::kWorker) {
    return ReplyError(req, absl::InvalidArgumentError("only registered workers rejoin"));
  }
  const int32_t rank = m->info.rank;
  elastic_->OnRejoinAsked();
  if (!elastic_->ResumesShard(rank)) {
    // A worker starting for the first time (kNew), or one with nothing left.
    node_->Reply(req, CoordinatorReply(elastic_->TakeRejoin(rank)));
    return;
  }
  if (recovery_->active() || finishing_) {
    return ReplyError(req, absl::UnavailableError("the cluster is recovering or ending"));
  }
  proto::Rejoin j = elastic_->TakeRejoin(rank);
  const uint64_t incarnation = m->info.incarnation;
  Parked waiter{req.route, req.id};
  auto readmitted = [this, rank, incarnation, waiter, j](absl::StatusOr<int64_t> step) mutable {
    Member* w = FindMember(Role::kWorker, rank);
    const bool same =
        w != nullptr && w->info.incarnation == incarnation && !elastic_->dropped(rank);
    absl::Status st = step.status();
    if (st.ok() && (!same || finishing_)) {
      st = absl::AbortedError("the worker was dropped again, or the job is ending");
    }
    if (!st.ok()) {
      node_->Reply(waiter.route, waiter.id, CoordinatorError(st));
      if (same && !finishing_) {
        // Its shard goes back to the orphans, from where it would resume.
        w->alive = false;
        DropWorker(w, absl::StrCat("worker ", rank, " could not be re-admitted (", st.message(), ")"));
      }
      return;
    }
    j.step = *step;
    j.position.clock = *step;
    spdlog::info("worker {} re-admitted at step {}, resuming its shard at epoch {} row {} ({} samples "
                 "trained before it was dropped)",
                 rank, j.step, j.position.epoch, j.position.rows, j.samples);
    node_->Reply(waiter.route, waiter.id, CoordinatorReply(j));
  };
  elastic_->ReadmitOnServers(rank, std::move(readmitted));
}

void Coordinator::DropWorker(Member* m, const std::string& reason) {
  const int32_t rank = m->info.rank;
  if (elastic_->dropped(rank)) {
    // A returning worker whose shard had been adopted died again: it had
    // nothing to train and nothing of it is waited for.
    spdlog::warn("{}; it was already out of the job", reason);
    return;
  }
  if (finishing_) return Finish(absl::UnavailableError(reason));
  for (const auto& t : defined_tables_) {
    if (t.on_workers) {
      return Finish(absl::UnavailableError(
          absl::StrCat(reason, "; allreduce mode cannot drop a worker from its collective group")));
    }
  }
  absl::Status st = elastic_->Drop(rank, reason, [this](int32_t w) {
    return workers_[w].has_value() && !workers_[w]->done;
  });
  if (!st.ok()) return Finish(st);
  JournalMember jm{m->info, m->done, /*dropped=*/true};
  elastic_->DroppedPosition(rank, &jm.data_epoch, &jm.data_rows, &jm.samples);
  Journal([&](CoordinatorJournal& j) { return j.SetMember(Role::kWorker, jm); });
  // Checkpoints no longer wait for it.
  checkpoints_->OnWorkerLeft(rank);
  MaybeEndJob();
}

void Coordinator::AdmitReturningWorker(Member* m, const proto::NodeInfo& info) {
  const int32_t rank = m->info.rank;
  node_->Disconnect(m->peer);
  m->info = info;
  m->info.rank = rank;
  m->peer = node_->Connect(info.endpoint);
  m->last_seen = absl::Now();
  m->alive = true;
  JournalMemberOf(*m);
  monitor()->OnJoin(m->info);
  elastic_->Readmit(rank, info);
}

void Coordinator::MaybeEndJob() {
  if (finishing_) return;
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!workers_[w] || (!workers_[w]->done && !elastic_->dropped(static_cast<int32_t>(w)))) return;
  }
  if (checkpoints_->FinalDue()) {
    // The final checkpoint, then the orderly stop.
    spdlog::info("all {} workers finished; final checkpoint, then stopping the servers",
                 options_.num_workers);
    checkpoints_->WriteFinal([this](absl::Status st) {
      if (!st.ok()) spdlog::error("final checkpoint failed: {}", st.ToString());
      Finish(absl::OkStatus());
    });
    return;
  }
  spdlog::info("all {} workers finished; stopping the servers", options_.num_workers);
  Finish(absl::OkStatus());
}

void Coordinator::Tick() {
  absl::Time now = absl::Now();
  store_.Expire(now);
  CheckHeartbeats(now);
  CheckResumeTimeout(now);
  recovery_->Expire(now);
  if (!finishing_) {
    if (absl::Status st = recovery_->CheckTimeout(now); !st.ok()) Finish(st);
  }
  if (!finishing_ && !AllJoined() && now - started_ > options_.join_timeout) {
    int s = 0, w = 0;
    for (const auto& m : servers_) s += m.has_value();
    for (const auto& m : workers_) w += m.has_value();
    Finish(absl::DeadlineExceededError(absl::StrCat(
        "only ", s, " of ", options_.num_servers, " servers and ", w, " of ", options_.num_workers,
        " workers joined within ", absl::FormatDuration(options_.join_timeout))));
  }
  node_->transport().RunAfter(std::min(options_.heartbeat_interval, kMaxTickPeriod),
                              [this] { Tick(); });
}

void Coordinator::CheckHeartbeats(absl::Time now) {
  for (auto* slots : {&servers_, &workers_}) {
    for (auto& m : *slots) {
      if (!m || !m->alive || m->done) continue;
      absl::Duration timeout = options_.heartbeat_timeout;
      if (m->info.role == Role::kWorker && options_.worker_timeout > absl::ZeroDuration()) {
        timeout = options_.worker_timeout;
      }
      if (now - m->last_seen <= timeout) continue;
      m->alive = false;
      monitor()->OnDead(m->info.role, m->info.rank);
      std::string who = MemberName(m->info.role, m->info.rank);
      spdlog::error("{} ({}, host {}, pid {}) is dead: no heartbeat for {}", who, m->info.endpoint,
                    m->info.host, m->info.pid, absl::FormatDuration(now - m->last_seen));
      if (finishing_) continue;
      std::string reason = absl::StrCat(who, " at ", m->info.endpoint, " stopped responding");
      if ((m->info.role == Role::kServer || options_.recover_workers) && CanRecover()) {
        StartRecovery(&*m, reason);
      } else if (m->info.role == Role::kWorker && options_.elastic_workers) {
        DropWorker(&*m, reason);
      } else {
        Finish(absl::UnavailableError(reason));
      }
    }
  }
}

void Coordinator::Finish(absl::Status status) {
  if (finishing_) return;
  finishing_ = true;
  monitor()->OnJobEnd(status);
  // A restarted coordinator says the job finished instead of training it
  // again; after a failure it starts the job over from its latest checkpoint.
  Journal([&](CoordinatorJournal& j) {
    return j.End(status.ok() ? JobState::kFinished : JobState::kFailed, checkpoints_->FinalStep(),
                 std::string(status.message()));
  });
  if (!status.ok()) spdlog::error("job ends: {}", status.ToString());
  std::vector<Member*> targets;
  for (auto* slots : {&servers_, &workers_}) {
    for (auto& m : *slots) {
      if (m && m->alive && !m->done) targets.push_back(&*m);
    }
  }
  auto remaining = std::make_shared<int>(static_cast<int>(targets.size()));
  auto done = [this, status] {
    auto end = [this, status] {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      result_ = status;
    };
    if (!status.ok()) return end();
    node_->transport().RunAfter(kFinishLinger, std::move(end));
  };
  if (targets.empty()) return done();
  proto::Header h;
  h.type = MsgType::kShutdown;
  h.sender_role = Role::kCoordinator;
  h.status_code = static_cast<int32_t>(status.code());
  h.status_message = std::string(status.message());
  for (Member* m : targets) {
    node_->Call(m->peer, proto::EncodeHeaderOnly(h), absl::Now() + kShutdownTimeout)
        .OnDone([remaining, done](const absl::StatusOr<Message>&) {
          if (--*remaining == 0) done();
        });
  }
}

}  // namespace pstrain::server
