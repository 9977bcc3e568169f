#include "server/ps/parameter_server.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cluster/node_info.h"
#include "common/half.h"
#include "common/http/http_server.h"
#include "common/optim/finite.h"

namespace pstrain::server {

using proto::Decoded;
using proto::MsgType;
using proto::Role;

namespace {
// How often Run() checks that the coordinator is still heard from: well
// under ServerOptions::coordinator_timeout, cheap (one clock read).
constexpr absl::Duration kCoordinatorCheckPeriod = absl::Seconds(1);
// After answering kShutdown: lets the reply leave before the server ends.
constexpr absl::Duration kShutdownReplyGrace = absl::Milliseconds(50);
}  // namespace

absl::StatusOr<std::unique_ptr<ParameterServer>> ParameterServer::Create(
    ServerOptions options, std::unique_ptr<Transport> transport) {
  if (options.coordinator.empty()) return absl::InvalidArgumentError("no coordinator address");
  auto node = std::make_unique<RpcNode>(std::move(transport));
  PS_ASSIGN_OR_RETURN(std::string bound, node->Bind(options.bind));
  std::string endpoint = AdvertisedEndpoint(bound, options.advertise_host);
  std::unique_ptr<ParameterServer> s(
      new ParameterServer(std::move(options), std::move(node), std::move(endpoint)));
  ParameterServer* self = s.get();
  PS_RETURN_IF_ERROR(self->StartMetrics());
  PS_RETURN_IF_ERROR(self->node_->Start([self](RpcRequest&& req) { self->Handle(std::move(req)); }));
  CoordinatorClientOptions co;
  co.coordinator = self->options_.coordinator;
  co.role = Role::kServer;
  co.requested_rank = self->options_.rank;
  co.endpoint = self->endpoint_;
  co.connect_timeout = self->options_.connect_timeout;
  co.reconnect_timeout = self->options_.coordinator_timeout;
  co.on_gave_up = [self](const absl::Status& why) { self->Finish(why); };
  self->client_ = std::make_unique<CoordinatorClient>(self->node_.get(), co);
  return s;
}

ParameterServer::ParameterServer(ServerOptions options, std::unique_ptr<RpcNode> node,
                                 std::string endpoint)
    : options_(std::move(options)), node_(std::move(node)), endpoint_(std::move(endpoint)) {}

ParameterServer::~ParameterServer() {
  http_.reset();
  if (client_) client_->StopHeartbeats();
  if (saver_.joinable()) saver_.join();  // a checkpoint being written ends first
  node_->Stop();
}

absl::Status ParameterServer::Run() {
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, client_->Register());
  node_->transport().Post([this, r = view.your_rank] { rank_ = r; });
  spdlog::info("server {} serving at {}", view.your_rank, endpoint_);
  client_->StartHeartbeats(absl::Milliseconds(view.heartbeat_interval_ms),
                           [this] { return HeartbeatBody(); });
  absl::MutexLock lock(&mu_);
  while (!finished_) {
    mu_.AwaitWithTimeout(absl::Condition(&finished_), kCoordinatorCheckPeriod);
    if (!finished_ && client_->gave_up()) {
      // The client waited options_.coordinator_timeout for a coordinator.
      finished_ = true;
      result_ = client_->CoordinatorStatus();
    }
  }
  client_->StopHeartbeats();
  return result_;
}

void ParameterServer::RequestStop() { Finish(absl::CancelledError("server stopped")); }

void ParameterServer::Finish(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  finished_ = true;
  result_ = std::move(status);
}

ServerStats ParameterServer::stats() const {
  return ServerStats{pulls_.load(), pushes_.load(), errors_.load(), parked_count_.load()};
}

absl::StatusOr<std::vector<TableStats>> ParameterServer::StoreStats(
    absl::Duration timeout) const {
  struct Answer {
    absl::Notification done;
    absl::StatusOr<std::vector<TableStats>> stats;
  };
  auto answer = std::make_shared<Answer>();
  node_->transport().Post([this, answer] {
    if (store_) {
      answer->stats = const_cast<ParameterServer*>(this)->CurrentStats();
    } else {
      answer->stats = absl::FailedPreconditionError("tables not created yet");
    }
    answer->done.Notify();
  });
  if (!answer->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("server I/O thread did not answer the stats request");
  }
  return answer->stats;
}

void ParameterServer::ReplyError(const RpcRequest& req, const absl::Status& status) {
  errors_.fetch_add(1, std::memory_order_relaxed);
  metrics_->OnError();
  node_->Reply(req, proto::EncodeError(Role::kServer, client_ ? rank_ : -1, status));
  if (IsFatal(status)) {
    // The tables cannot go on (a disk tier that cannot be written): the
    // server stops; the job rolls back to its last committed checkpoint.
    absl::Status plain(status.code(), status.message());  // without the mark
    spdlog::error("server {}: stopping: {}", rank_, plain.ToString());
    Finish(plain);
  }
}

void ParameterServer::Handle(RpcRequest&& req) {
  absl::StatusOr<Decoded> d = proto::Decode(req.message);
  if (d.ok() && tables_busy_ && d->type() != MsgType::kPing) {
    deferred_.push_back(std::move(req));  // served when the checkpoint is written
    return;
  }
  metrics_->BeginRequest();
  if (!d.ok()) {
    spdlog::warn("server: dropped a malformed request: {}", d.status().ToString());
    return ReplyError(req, d.status());
  }
  switch (d->type()) {
    case MsgType::kPull: return OnPull(*std::move(d), std::move(req));
    case MsgType::kPush: return OnPush(*std::move(d), std::move(req));
    case MsgType::kPushPull: return OnPushPull(*d, req);
    case MsgType::kCreateTables: return OnCreateTables(*d, req);
    case MsgType::kShutdown: return OnShutdown(*d, req);
    case MsgType::kPing: {
      // Unhealthy while its coordinator is lost.
      absl::Status st = client_->CoordinatorStatus();
      return node_->Reply(req, st.ok() ? proto::EncodeOk(Role::kServer, rank_)
                                       : proto::EncodeError(Role::kServer, rank_, st));
    }
    case MsgType::kDumpRows: return OnDumpRows(*d, req);
    case MsgType::kSaveShard: return OnSaveShard(*d, req);
    case MsgType::kRecover: return OnRecover(*d, req);
    case MsgType::kRetireWorker: return OnRetireWorker(*d, req);
    case MsgType::kReadmitWorker: return OnReadmitWorker(*d, req);
    default:
      ReplyError(req, absl::UnimplementedError(
                          absl::StrCat("server does not serve ", proto::MsgTypeName(d->type()))));
  }
}

void ParameterServer::OnCreateTables(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator creates tables"));
  }
  auto body = d.body<proto::CreateTablesRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  if (store_) {
    return ReplyError(req, absl::AlreadyExistsError("tables were already created"));
  }
  int32_t known = client_->rank();
  if (known >= 0 && known != body->server_rank) {
    return ReplyError(req, absl::FailedPreconditionError(absl::StrCat(
                               "tables for server ", body->server_rank, " sent to server ", known)));
  }
  rank_ = body->server_rank;
  const proto::TableLayout* layout = &body->layout;
  auto store = ShardSet::Create(
      *layout, rank_, options_.threads,
      [this](absl::AnyInvocable<void()> fn) { node_->transport().Post(std::move(fn)); },
      options_.tier);
  if (!store.ok()) return ReplyError(req, store.status());
  store_ = *std::move(store);
  ++generation_;
  metrics_->OnTablesCreated(
      store_->layout(), [this](uint32_t t) { return store_->holds(t); }, options_.tier.enabled());
  policy_ = ConsistencyPolicy::Create(*layout);
  size_t dense = 0, sparse = 0;
  for (const auto& t : layout->tables) (t.kind == TableKind::kDense ? dense : sparse)++;
  if (store_->threads() > 1) {
    spdlog::info("server {}: {} dense and {} sparse tables created on {} executor threads", rank_,
                 dense, sparse, store_->threads());
  } else {
    spdlog::info("server {}: {} dense and {} sparse tables created", rank_, dense, sparse);
  }
  if (body->restore_files.empty()) return node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  // A restore of gigabytes takes many heartbeat intervals: off the I/O thread.
  const absl::Time t0 = absl::Now();
  OffIoThread([this, files = body->restore_files] { return store_->Restore(files); },
              [this, req, layout = body->layout, files = body->restore_files.size(),
               t0](absl::Status st) { FinishRestore(req, layout, files, t0, st); });
}

void ParameterServer::FinishRestore(const RpcRequest& req, const proto::TableLayout& layout,
                                    size_t files, absl::Time t0, absl::Status st) {
  if (!st.ok()) {
    store_.reset();
    spdlog::error("server {}: restore failed: {}", rank_, st.ToString());
    return ReplyError(req, st);
  }
  // The workers resume from their checkpointed clocks.
  policy_->Restore(layout.positions, layout.restored_step);
  spdlog::info("server {}: restored step {} from {} shard files in {:.2f}s", rank_,
               layout.restored_step, files, absl::ToDoubleSeconds(absl::Now() - t0));
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
}

void ParameterServer::OffIoThread(std::function<absl::Status()> work,
                                  std::function<void(absl::Status)> done) {
  tables_busy_ = true;
  last_stats_ = store_ ? store_->Stats() : std::vector<TableStats>{};
  if (saver_.joinable()) saver_.join();  // the previous one, already done
  saver_ = std::thread([this, work = std::move(work), done = std::move(done)]() mutable {
    absl::Status st = work();
    node_->transport().Post([this, st, done = std::move(done)] {
      tables_busy_ = false;
      done(st);
      // In arrival order; one of them may start another (deferring the rest).
      std::vector<RpcRequest> waiting = std::move(deferred_);
      deferred_.clear();
      for (RpcRequest& r : waiting) Handle(std::move(r));
    });
  });
}

void ParameterServer::OnRecover(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator rolls the cluster back"));
  }
  auto body = d.body<proto::RecoverNotice>();
  if (!body.ok()) return ReplyError(req, body.status());
  // The tables go: the coordinator recreates them from the latest checkpoint
  // (every server, so the model stays one consistent cut). Waiting pulls
  // fail now; their workers wait for the recovery.
  absl::Status why = absl::AbortedError(absl::StrCat("cluster recovering (epoch ", body->epoch,
                                                     "): ", body->reason));
  for (ParkedPull& p : parked_) ReplyError(p.pull->request, why);
  parked_.clear();
  parked_count_.store(0, std::memory_order_relaxed);
  store_.reset();
  ++generation_;
  spdlog::warn("server {}: {}; tables dropped until the coordinator restores them", rank_,
               std::string(why.message()));
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
}

void ParameterServer::OnSaveShard(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator takes checkpoints"));
  }
  if (!store_) return ReplyError(req, absl::AbortedError("no tables (not created yet, or recovering)"));
  auto body = d.body<proto::SaveShardRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  // Written off the I/O thread (ShardSet::SaveShard holds the executors): a
  // shard of gigabytes takes many heartbeat intervals, and a silent server
  // would be declared dead.
  const std::string file = absl::StrCat("server-", rank_, ".shard");
  const int64_t step = body->step;
  auto result = std::make_shared<absl::StatusOr<std::pair<uint64_t, std::string>>>();
  auto seconds = std::make_shared<double>(0);
  OffIoThread(
      [this, result, seconds, step, path = body->dir + "/" + file] {
        const absl::Time t0 = absl::Now();
        *result = store_->SaveShard(path, static_cast<uint64_t>(step));
        *seconds = absl::ToDoubleSeconds(absl::Now() - t0);
        return result->status();
      },
      [this, req, result, seconds, step, file](absl::Status st) {
        if (!st.ok()) {
          metrics_->RecordCheckpointWrite(*seconds, 0, /*ok=*/false);
          spdlog::error("server {}: checkpoint {} failed: {}", rank_, step, st.ToString());
          return ReplyError(req, st);
        }
        proto::ShardSaved saved;
        saved.file = file;
        saved.bytes = (*result)->first;
        saved.checksum = (*result)->second;
        metrics_->RecordCheckpointWrite(*seconds, saved.bytes, /*ok=*/true);
        spdlog::info("server {}: checkpoint shard of step {} written ({} bytes, {:.2f}s)", rank_,
                     step, saved.bytes, *seconds);
        proto::Header h;
        h.type = MsgType::kReply;
        h.sender_role = Role::kServer;
        h.sender_rank = rank_;
        node_->Reply(req, proto::Encode(h, saved));
      });
}

std::vector<TableStats> ParameterServer::CurrentStats() {
  if (!store_) return {};
  if (!tables_busy_) last_stats_ = store_->Stats();
  return last_stats_;
}

absl::Status ParameterServer::CheckWorker(const proto::Header& h) const {
  if (h.sender_role != Role::kWorker || !policy_->is_worker(h.sender_rank)) {
    return absl::InvalidArgumentError(absl::StrCat("request from ", proto::RoleName(h.sender_role),
                                                   " ", h.sender_rank, ", not a known worker"));
  }
  if (h.step < 0) return absl::InvalidArgumentError("negative clock");
  if (h.epoch != store_->layout().epoch) {
    return absl::AbortedError(absl::StrCat("request of epoch ", h.epoch, " but the cluster is at epoch ",
                                           store_->layout().epoch, " (it rolled back after a failure)"));
  }
  return absl::OkStatus();
}

void ParameterServer::MaybeCompleteStep() {
  const std::optional<int64_t> step = policy_->CompleteStep(store_->layout().epoch);
  if (!step) return;
  store_->BspApply(*step, [this, step = *step](absl::Status st) {
    if (!st.ok()) spdlog::error("server {}: applying step {} failed: {}", rank_, step, st.ToString());
  });
  metrics_->OnBspStepApplied();
  ReleaseParkedPulls();
}

std::shared_ptr<ParameterServer::KvCall> ParameterServer::StartKvCall(
    Decoded&& d, RpcRequest&& req, bool is_push, proto::KvRequest* body) {
  if (!store_) {
    ReplyError(req, absl::AbortedError("no tables (not created yet, or recovering)"));
    return nullptr;
  }
  if (absl::Status st = CheckWorker(d.header()); !st.ok()) {
    ReplyError(req, st);
    return nullptr;
  }
  // The request moves into the call first: the ops point into it.
  auto call = std::make_shared<KvCall>(
      KvCall{std::move(req), std::move(d), {}, metrics_->request_start()});
  auto decoded = call->decoded.body<proto::KvRequest>();
  if (!decoded.ok()) {
    ReplyError(call->request, decoded.status());
    return nullptr;
  }
  *body = *std::move(decoded);
  call->values_f16 = !is_push && body->values_f16;
  auto ops = store_->Validate(call->decoded, *body, is_push);
  if (!ops.ok()) {
    ReplyError(call->request, ops.status());
    return nullptr;
  }
  call->ops = *std::move(ops);
  return call;
}

void ParameterServer::OnPull(Decoded&& d, RpcRequest&& req) {
  proto::KvRequest body;
  std::shared_ptr<KvCall> call = StartKvCall(std::move(d), std::move(req), /*is_push=*/false, &body);
  if (!call) return;
  int64_t clock = call->decoded.header().step;
  if (!policy_->PullReady(clock)) {
    parked_count_.fetch_add(1, std::memory_order_relaxed);
    parked_.push_back(ParkedPull{clock, std::move(call)});
    return;
  }
  ServePull(std::move(call));
}

void ParameterServer::ServePull(std::shared_ptr<KvCall> pull) {
  const std::vector<KvOp>& ops = pull->ops;
  store_->Pull(ops, pull, [this, pull](absl::StatusOr<std::vector<Buffer>> values) {
    if (!values.ok()) return ReplyError(pull->request, values.status());
    proto::Header h;
    h.type = MsgType::kReply;
    h.sender_role = Role::kServer;
    h.sender_rank = rank_;
    h.step = policy_->applied();
    std::vector<proto::DType> types(values->size(), proto::DType::kF32);
    if (pull->values_f16) {
      // In half floats, every part a slice of one allocation (one frame).
      size_t total = 0;
      for (const Buffer& v : *values) total += (v.size() / sizeof(float) + 3) & ~size_t{3};
      uint8_t* out = nullptr;
      const Buffer halves = Buffer::Allocate(total * sizeof(uint16_t), &out);
      size_t at = 0;
      for (size_t i = 0; i < values->size(); ++i) {
        const std::span<const float> v = (*values)[i].as<float>();
        FloatsToHalves(v.data(), reinterpret_cast<uint16_t*>(out) + at, v.size());
        (*values)[i] = halves.Slice(at * sizeof(uint16_t), v.size() * sizeof(uint16_t));
        types[i] = proto::DType::kF16;
        at += (v.size() + 3) & ~size_t{3};  // 8-byte aligned slices
      }
    }
    pulls_.fetch_add(1, std::memory_order_relaxed);
    metrics_->set_request_start(pull->arrived_ns);
    metrics_->OnPullServed(pull->ops);
    node_->Reply(pull->request, proto::EncodeHeaderOnly(std::move(h), *std::move(values), types));
  });
}

void ParameterServer::ReleaseParkedPulls() {
  if (parked_.empty()) return;
  std::vector<ParkedPull> still;
  std::vector<ParkedPull> ready;
  for (ParkedPull& p : parked_) {
    (policy_->PullReady(p.clock) ? ready : still).push_back(std::move(p));
  }
  parked_.swap(still);
  for (ParkedPull& p : ready) ServePull(std::move(p.pull));
}

void ParameterServer::OnPush(Decoded&& d, RpcRequest&& req) {
  proto::KvRequest request;
  std::shared_ptr<KvCall> call = StartKvCall(std::move(d), std::move(req), /*is_push=*/true, &request);
  if (!call) return;
  const proto::KvRequest* body = &request;
  const std::vector<KvOp>& parts = call->ops;
  if (body->num_samples == 0 && !parts.empty()) {
    return ReplyError(call->request, absl::InvalidArgumentError("push of gradients over zero samples"));
  }
  // A piece of a push sent in pieces (KvRequest::partial): applied or
  // summed like any push, but the worker's clock moves with the last one.
  const bool partial = body->partial;
  if (partial && (parts.empty() || body->retire ||
                  std::any_of(parts.begin(), parts.end(), [](const KvOp& op) { return op.sparse; }))) {
    return ReplyError(call->request, absl::InvalidArgumentError(
                                         "a partial push carries dense parts only, and does not retire"));
  }
  // Refuse the whole push, before anything changes, if any part is bad.
  // A single part applied on arrival by the I/O thread needs no scan here:
  // its table refuses a non-finite gradient by itself and stays unchanged
  // (one pass less over the gradients). Summed (BSP) parts are checked
  // before they are added; executor threads each refuse only their part.
  const bool sums = policy_->sums_pushes();
  const bool table_checks = parts.size() == 1 && !sums && store_->threads() == 1;
  for (size_t k = 0; !table_checks && k < parts.size(); ++k) {
    const KvOp& op = parts[k];
    size_t bad = optim::FindNonFinite(op.values.data(), op.values.size());
    if (bad != op.values.size()) {
      const TableSpec& spec = store_->layout().tables[op.table];
      return ReplyError(call->request, absl::InvalidArgumentError(absl::StrCat(
                                 "non-finite gradient in table ", spec.name, " at element ", bad,
                                 op.sparse ? absl::StrCat(" (id ", op.ids[bad / spec.dim], ")") : "",
                                 "; push refused, table unchanged")));
    }
  }
  ConsistencyPolicy::Push push;
  push.worker = call->decoded.header().sender_rank;
  push.clock = call->decoded.header().step;
  push.has_parts = !parts.empty();
  push.has_samples = body->num_samples > 0;
  push.retire = body->retire;
  if (sums) {
    // BSP: the push is summed now and applied with its step; the clocks
    // move on arrival.
    if (absl::Status st = policy_->CheckPush(push); !st.ok()) return ReplyError(call->request, st);
    auto reply = [this, call](absl::Status st) {
      if (!st.ok()) return ReplyError(call->request, st);
      metrics_->set_request_start(call->arrived_ns);
      metrics_->OnPushApplied(call->ops, /*applied_now=*/false);
      node_->Reply(call->request, proto::EncodeOk(Role::kServer, rank_));
    };
    if (partial) {
      // Summed now; the step's last piece carries the samples and counts.
      store_->BspAdd(parts, 0, call, std::move(reply));
      return;
    }
    const bool counts = BspPolicy::Counts(push);
    const bool release = policy_->OnPush(push);
    pushes_.fetch_add(1, std::memory_order_relaxed);
    // Summed before the step is applied: each part runs its queue in order.
    if (counts) {
      store_->BspAdd(parts, body->num_samples, call, std::move(reply));
    } else {
      reply(absl::OkStatus());
    }
    MaybeCompleteStep();
    if (release) ReleaseParkedPulls();
    return;
  }
  // ASP/SSP: the clock moves once the push is applied, so the pulls it
  // releases read it.
  auto done = [this, call, push, partial, generation = generation_](absl::Status st) {
    if (!st.ok()) return ReplyError(call->request, st);
    if (generation != generation_) {
      return ReplyError(call->request, absl::AbortedError("the tables were replaced meanwhile"));
    }
    metrics_->set_request_start(call->arrived_ns);
    metrics_->OnPushApplied(call->ops, /*applied_now=*/true);
    if (partial) return node_->Reply(call->request, proto::EncodeOk(Role::kServer, rank_));
    const bool release = policy_->OnPush(push);
    pushes_.fetch_add(1, std::memory_order_relaxed);
    node_->Reply(call->request, proto::EncodeOk(Role::kServer, rank_));
    if (release) ReleaseParkedPulls();
  };
  if (parts.empty()) return done(absl::OkStatus());
  store_->Push(parts, 1.0f / static_cast<float>(body->num_samples), push.clock, call,
               std::move(done));
}

void ParameterServer::OnDumpRows(const Decoded& d, const RpcRequest& req) {
  if (!store_) return ReplyError(req, absl::AbortedError("no tables (not created yet, or recovering)"));
  auto body = d.body<proto::DumpRequest>();
  if (!body.ok()) return ReplyError(req, body.status());
  std::vector<uint64_t> ids;
  std::vector<float> values;
  std::vector<uint64_t> removed;
  proto::DumpRequest request = *body;
  request.max_rows = std::min<uint64_t>(request.max_rows, 1 << 22);
  const bool versioned = request.seq > 0 || request.mode != proto::DumpMode::kAll;
  auto total = versioned ? store_->DumpExport(request, &ids, &values, &removed)
                         : store_->Dump(request.table, request.offset, request.max_rows, &ids,
                                        &values);
  if (!total.ok()) return ReplyError(req, total.status());
  proto::Header h;
  h.type = MsgType::kReply;
  h.sender_role = Role::kServer;
  h.sender_rank = rank_;
  h.step = static_cast<int64_t>(*total);
  std::vector<Buffer> payloads = {Buffer::FromVector(std::move(ids)),
                                  Buffer::FromVector(std::move(values))};
  std::vector<proto::DType> types = {proto::DType::kU64, proto::DType::kF32};
  if (request.mode == proto::DumpMode::kChanged) {
    payloads.push_back(Buffer::FromVector(std::move(removed)));
    types.push_back(proto::DType::kU64);
  }
  node_->Reply(req, proto::EncodeHeaderOnly(h, std::move(payloads), std::move(types)));
}

void ParameterServer::OnShutdown(const Decoded& d, const RpcRequest& req) {
  if (d.header().sender_role != Role::kCoordinator) {
    return ReplyError(req, absl::PermissionDeniedError("only the coordinator stops servers"));
  }
  node_->Reply(req, proto::EncodeOk(Role::kServer, rank_));
  client_->StopHeartbeats();
  absl::Status why = proto::RemoteStatus(d.header());
  if (why.ok()) {
    spdlog::info("server {}: shutting down", rank_);
    if (store_) {
      for (const TableStats& t : store_->Stats()) {
        if (!t.sparse) continue;
        spdlog::info("server {}: table {}: {} rows, {} bytes (sketch {}), {} ids admitted, {} "
                     "pushed ids refused in {} pushes, {} rows evicted for capacity and {} for "
                     "ttl",
                     rank_, t.name, t.rows, t.bytes, t.sketch_bytes, t.admitted, t.refused_ids,
                     t.refused_pushes, t.evicted_capacity, t.evicted_ttl);
        if (t.tiered) {
          spdlog::info("server {}: table {}: disk tier: {} rows in RAM and {} on disk ({} MiB of "
                       "files), {} rows read from disk ({} found), {} written",
                       rank_, t.name, t.ram_rows, t.disk_rows, t.tier_disk_bytes >> 20,
                       t.tier_reads, t.tier_hits, t.tier_writes);
        }
      }
    }
  } else {
    spdlog::error("server {}: job aborted: {}", rank_, why.ToString());
  }
  // The job's end is this server's: a failed job fails here too (exit 1),
  // so a restart policy on failure brings the server back.
  absl::Status end = why.ok() ? why : absl::AbortedError(absl::StrCat("job aborted: ", why.message()));
  node_->transport().RunAfter(kShutdownReplyGrace, [this, end] { Finish(end); });
}

}  // namespace pstrain::server
