#include "cluster/coordinator_client.h"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "cluster/node_info.h"

namespace pstrain {

using proto::DecodeReply;
using proto::Decoded;
using proto::Header;
using proto::MsgType;

namespace {
// Register() retries an unreachable coordinator: the pause between tries
// starts short (a coordinator starting next to us is up in milliseconds) and
// doubles up to a cap that keeps a waiting cluster's load negligible.
constexpr absl::Duration kFirstRegisterBackoff = absl::Milliseconds(50);
constexpr absl::Duration kMaxRegisterBackoff = absl::Seconds(2);
// Each try's own deadline grows too (1, 2, 4, 5, 5, ... s): a coordinator
// that is up answers in milliseconds, a busy one gets a little longer.
constexpr absl::Duration kFirstRegisterAttempt = absl::Seconds(1);
constexpr absl::Duration kMaxRegisterAttempt = absl::Seconds(5);
// A wait the coordinator ends itself (it answers at the wait's deadline)
// gets this much longer locally, so its answer, not a local timeout, decides.
constexpr absl::Duration kWaitReplySlack = absl::Seconds(5);
// kRejoin takes two round trips to every server at most (kReadmitWorker),
// each bounded by the coordinator's 10 s re-admit deadline.
constexpr absl::Duration kRejoinTimeout = absl::Seconds(30);
}  // namespace

CoordinatorClient::CoordinatorClient(RpcNode* node, CoordinatorClientOptions options)
    : node_(node),
      options_(std::move(options)),
      alive_(std::make_shared<std::atomic<bool>>(true)) {
  peer_ = node_->Connect(options_.coordinator);
}

CoordinatorClient::~CoordinatorClient() {
  StopHeartbeats();
  alive_->store(false);
}

Header CoordinatorClient::MakeHeader(MsgType type) const {
  Header h;
  h.type = type;
  h.sender_role = options_.role;
  h.sender_rank = rank_.load();
  h.epoch = epoch_.load();
  return h;
}

absl::StatusOr<Decoded> CoordinatorClient::CallDecoded(Message m, absl::Duration timeout,
                                                       absl::string_view what) {
  RpcFuture f = node_->Call(peer_, std::move(m), absl::Now() + timeout);
  return DecodeReply(f.Wait(), absl::StrCat(what, " (coordinator ", options_.coordinator, ")"));
}

absl::StatusOr<proto::ClusterView> CoordinatorClient::Register() {
  proto::RegisterRequest req;
  req.node.role = options_.role;
  req.node.rank = options_.requested_rank;
  req.node.endpoint = options_.endpoint;
  req.node.host = LocalHostName();
  req.node.pid = static_cast<int32_t>(getpid());
  req.node.incarnation = ProcessIncarnation();
  req.requested_rank = options_.requested_rank;
  absl::Time give_up = absl::Now() + options_.connect_timeout;
  absl::Duration backoff = kFirstRegisterBackoff;
  absl::Duration attempt = kFirstRegisterAttempt;
  absl::Status last;
  bool warned = false;
  while (true) {
    absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    auto d = CallDecoded(proto::Encode(MakeHeader(MsgType::kRegister), req),
                         std::min(left, attempt), "register");
    attempt = std::min(attempt * 2, kMaxRegisterAttempt);
    if (d.ok()) {
      PS_ASSIGN_OR_RETURN(proto::ClusterView view, d->body<proto::ClusterView>());
      rank_ = view.your_rank;
      epoch_ = view.epoch;
      last_contact_ns_ = absl::ToUnixNanos(absl::Now());
      return view;
    }
    last = d.status();
    // Only an unreachable coordinator is worth waiting for.
    if (last.code() != absl::StatusCode::kUnavailable &&
        last.code() != absl::StatusCode::kDeadlineExceeded) {
      return last;
    }
    if (!warned) {
      spdlog::info("waiting for the coordinator at {} ...", options_.coordinator);
      warned = true;
    }
    absl::SleepFor(std::min(backoff, give_up - absl::Now()));
    backoff = std::min(backoff * 2, kMaxRegisterBackoff);
  }
  return absl::UnavailableError(absl::StrCat("coordinator ", options_.coordinator,
                                             " unreachable for ",
                                             absl::FormatDuration(options_.connect_timeout),
                                             ": ", last.message()));
}

absl::StatusOr<proto::ClusterView> CoordinatorClient::WaitForCluster(absl::Duration timeout) {
  Header h = MakeHeader(MsgType::kGetCluster);
  h.step = absl::ToInt64Milliseconds(timeout);
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded(proto::EncodeHeaderOnly(h), timeout + kWaitReplySlack,
                                             "wait for cluster"));
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, d.body<proto::ClusterView>());
  epoch_ = view.epoch;
  return view;
}

absl::StatusOr<proto::TableLayout> CoordinatorClient::DefineTables(
    const std::vector<TableSpec>& tables, absl::Duration timeout) {
  proto::DefineTablesRequest req;
  req.tables = tables;
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded(proto::Encode(MakeHeader(MsgType::kDefineTables), req),
                                             timeout, "define tables"));
  return d.body<proto::TableLayout>();
}

absl::StatusOr<proto::Recovered> CoordinatorClient::WaitForRecovery(uint64_t epoch,
                                                                   absl::Duration wait) {
  proto::WaitRecoveryRequest req{epoch, absl::ToInt64Milliseconds(wait)};
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded(proto::Encode(MakeHeader(MsgType::kWaitRecovery), req),
                                             wait + options_.recovery_timeout,
                                             "wait for recovery"));
  PS_ASSIGN_OR_RETURN(proto::Recovered r, d.body<proto::Recovered>());
  epoch_ = r.epoch;
  return r;
}

absl::StatusOr<proto::ShardClaim> CoordinatorClient::ClaimShard() {
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded(proto::EncodeHeaderOnly(MakeHeader(MsgType::kClaimShard)),
                                             options_.call_timeout, "claim a shard"));
  return d.body<proto::ShardClaim>();
}

absl::StatusOr<proto::Rejoin> CoordinatorClient::Rejoin() {
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded(proto::EncodeHeaderOnly(MakeHeader(MsgType::kRejoin)),
                                             std::max(options_.call_timeout, kRejoinTimeout),
                                             "rejoin"));
  return d.body<proto::Rejoin>();
}

absl::Status CoordinatorClient::Barrier(const std::string& name, int participants,
                                        absl::Duration timeout) {
  proto::BarrierRequest req{name, participants};
  return CallDecoded(proto::Encode(MakeHeader(MsgType::kBarrier), req), timeout,
                     absl::StrCat("barrier ", name))
      .status();
}

absl::Status CoordinatorClient::StoreSet(const std::string& key, Buffer value) {
  proto::StoreRequest req;
  req.keys = {key};
  return CallDecoded(proto::Encode(MakeHeader(MsgType::kStoreSet), req, {std::move(value)},
                                   {proto::DType::kU8}),
                     options_.call_timeout, absl::StrCat("store set ", key))
      .status();
}

absl::StatusOr<Buffer> CoordinatorClient::StoreGet(const std::string& key, absl::Duration wait) {
  proto::StoreRequest req;
  req.keys = {key};
  req.wait_ms = absl::ToInt64Milliseconds(wait);
  PS_ASSIGN_OR_RETURN(Decoded d,
                      CallDecoded(proto::Encode(MakeHeader(MsgType::kStoreGet), req),
                                  wait + options_.call_timeout, absl::StrCat("store get ", key)));
  PS_RETURN_IF_ERROR(d.CheckPayload(0, proto::DType::kU8));
  return d.payload(0);
}

absl::Status CoordinatorClient::WorkerDone() {
  return CallDecoded(proto::EncodeHeaderOnly(MakeHeader(MsgType::kWorkerDone)),
                     options_.call_timeout, "worker done")
      .status();
}

absl::StatusOr<proto::CheckpointDone> CoordinatorClient::CheckpointArrive(
    int64_t step, const proto::WorkerPosition& position, Buffer state) {
  proto::CheckpointArrive req{step, position};
  std::vector<Buffer> payloads;
  std::vector<proto::DType> types;
  if (!state.empty()) {
    payloads.push_back(std::move(state));
    types.push_back(proto::DType::kU8);
  }
  PS_ASSIGN_OR_RETURN(
      Decoded d, CallDecoded(proto::Encode(MakeHeader(MsgType::kCheckpointArrive), req,
                                           std::move(payloads), types),
                             options_.checkpoint_timeout, absl::StrCat("checkpoint at step ", step)));
  return d.body<proto::CheckpointDone>();
}

void CoordinatorClient::StartHeartbeats(absl::Duration interval,
                                        std::function<proto::Heartbeat()> fill) {
  fill_ = std::move(fill);
  if (heartbeating_.exchange(true)) return;
  node_->transport().Post([this, interval] { HeartbeatTick(interval); });
}

void CoordinatorClient::StopHeartbeats() { heartbeating_ = false; }

void CoordinatorClient::HeartbeatTick(absl::Duration interval) {
  if (!heartbeating_ || !alive_->load()) return;
  proto::Heartbeat hb = fill_ ? fill_() : proto::Heartbeat{};
  // Fire and forget: a missed reply only matters to the coordinator.
  std::weak_ptr<std::atomic<bool>> alive = alive_;
  node_->Call(peer_, proto::Encode(MakeHeader(MsgType::kHeartbeat), hb), absl::Now() + interval * 2)
      .OnDone([this, alive](const absl::StatusOr<Message>& reply) {
        auto a = alive.lock();
        if (a && a->load() && proto::DecodeReply(reply, "heartbeat").ok()) {
          last_contact_ns_ = absl::ToUnixNanos(absl::Now());
        }
      });
  node_->transport().RunAfter(interval, [this, interval, alive] {
    auto a = alive.lock();
    if (a && a->load()) HeartbeatTick(interval);
  });
}

}  // namespace pstrain
