#include "cluster/coordinator_client.h"

#include <unistd.h>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "cluster/node_info.h"
#include "common/status.h"

namespace pstrain {

namespace {
// Marks the status the client made of such an answer (an OutOfRange from
// elsewhere, e.g. a table's range check, is not one).
constexpr absl::string_view kNothingLeftToDoPayload = "pstrain/nothing-left-to-do";
}  // namespace

absl::Status NothingLeftToDo(absl::string_view why) {
  absl::Status st = absl::OutOfRangeError(why);
  st.SetPayload(kNothingLeftToDoPayload, absl::Cord("1"));
  return st;
}

bool IsNothingLeftToDo(const absl::Status& status) {
  return status.GetPayload(kNothingLeftToDoPayload).has_value();
}


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
// A call that got no answer waits this much past lost_after for the
// heartbeats to tell whether the coordinator is lost (then it is re-issued)
// or was only slow (then its error stands).
constexpr absl::Duration kLostCheckSlack = absl::Seconds(1);
// How often a call waiting for a lost coordinator looks again.
constexpr absl::Duration kLostPoll = absl::Milliseconds(20);
// WorkerDone's quick attempts (see there), within the coordinator's
// kFinishLinger (server/coordinator/coordinator.cc) together.
constexpr int kDoneAttempts = 4;
constexpr absl::Duration kDoneAttempt = absl::Milliseconds(250);

bool NoAnswer(const absl::Status& st) {
  return st.code() == absl::StatusCode::kDeadlineExceeded ||
         st.code() == absl::StatusCode::kUnavailable;
}
}  // namespace

struct CoordinatorClient::Life {
  absl::Mutex mu;
  bool alive ABSL_GUARDED_BY(mu) = true;
  int running ABSL_GUARDED_BY(mu) = 0;  // callbacks inside the client now
};

namespace {

// Runs fn() (a callback of the I/O thread that uses the client) unless the
// client is gone; the client's destructor waits until fn has returned. No
// lock is held while fn runs, so a callback that fn runs inline may enter
// again.
template <typename Life, typename F>
void RunIfAlive(const std::weak_ptr<Life>& weak, F&& fn) {
  std::shared_ptr<Life> life = weak.lock();
  if (life == nullptr) return;
  {
    absl::MutexLock lock(&life->mu);
    if (!life->alive) return;
    ++life->running;
  }
  fn();
  absl::MutexLock lock(&life->mu);
  --life->running;
}

}  // namespace

CoordinatorClient::CoordinatorClient(RpcNode* node, CoordinatorClientOptions options)
    : node_(node),
      options_(std::move(options)),
      life_(std::make_shared<Life>()) {
  peer_ = node_->Connect(options_.coordinator);
}

CoordinatorClient::~CoordinatorClient() {
  StopHeartbeats();
  // After this no callback enters the client, and one inside it has left:
  // checking a flag alone let a heartbeat timer that had just checked it
  // run on in a destroyed client (a segfault seen under load).
  absl::MutexLock lock(&life_->mu);
  life_->alive = false;
  life_->mu.Await(absl::Condition(
      +[](Life* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu) { return l->running == 0; }, life_.get()));
}

Header CoordinatorClient::MakeHeader(MsgType type) const {
  Header h;
  h.type = type;
  h.sender_role = options_.role;
  h.sender_rank = rank_.load();
  h.epoch = epoch_.load();
  return h;
}

absl::Status CoordinatorClient::CoordinatorStatus() const {
  if (gave_up_.load()) {
    absl::MutexLock lock(&mu_);
    return give_up_status_;
  }
  if (lost_.load()) {
    return absl::UnavailableError(absl::StrCat(
        "lost the coordinator at ", options_.coordinator, " ",
        absl::FormatDuration(absl::Trunc(absl::Now() - absl::FromUnixNanos(lost_since_ns_.load()),
                                         absl::Milliseconds(100))),
        " ago; registering again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Decoded> CoordinatorClient::CallDecoded(const std::function<Message()>& make,
                                                       absl::Duration timeout,
                                                       absl::string_view what) {
  const std::string context = absl::StrCat(what, " (coordinator ", options_.coordinator, ")");
  const bool reconnect = options_.reconnect_timeout > absl::ZeroDuration();
  while (true) {
    if (gave_up_.load()) return Annotate(CoordinatorStatus(), context);
    // While the coordinator is lost, wait for one to take this node back.
    while (reconnect && heartbeating_.load() && lost_.load() && !gave_up_.load()) {
      absl::SleepFor(kLostPoll);
    }
    if (gave_up_.load()) return Annotate(CoordinatorStatus(), context);
    const uint64_t registrations = registrations_.load();
    absl::StatusOr<Message> reply = node_->Call(peer_, make(), absl::Now() + timeout).Wait();
    if (reply.ok() || !reconnect || !heartbeating_.load() || !NoAnswer(reply.status())) {
      return DecodeReply(std::move(reply), context);
    }
    // No answer: lost (then re-issued once a coordinator took the node
    // back), or only slow (then the error stands).
    const absl::Time until = absl::Now() + LostAfter(options_.lost_after) + kLostCheckSlack;
    while (absl::Now() < until && !lost_.load() && !gave_up_.load() &&
           registrations_.load() == registrations) {
      absl::SleepFor(kLostPoll);
    }
    if (!lost_.load() && !gave_up_.load() && registrations_.load() == registrations) {
      return DecodeReply(std::move(reply), context);
    }
    spdlog::info("{}: no answer from the lost coordinator; re-issued once one takes this node back",
                 context);
  }
}

proto::RegisterRequest CoordinatorClient::RegisterBody(bool resume) const {
  proto::RegisterRequest req;
  req.node.role = options_.role;
  req.node.rank = resume ? rank_.load() : options_.requested_rank;
  req.node.endpoint = options_.endpoint;
  req.node.host = LocalHostName();
  req.node.pid = static_cast<int32_t>(getpid());
  req.node.incarnation = ProcessIncarnation();
  req.node.node_id = options_.node_id;
  req.node.resume = resume;
  req.requested_rank = resume ? rank_.load() : options_.requested_rank;
  return req;
}

absl::Duration CoordinatorClient::LostAfter(absl::Duration interval) const {
  if (options_.lost_after > absl::ZeroDuration()) return options_.lost_after;
  // As long as the coordinator waits for a silent node (its default
  // heartbeat_timeout is 10 intervals): a coordinator starved of CPU for a
  // few seconds on a loaded machine is not taken for lost (at 5 intervals,
  // a worker that had just reported its end once was, and then waited for
  // a coordinator that had finished the job and exited).
  return std::max(absl::Seconds(2), interval * 10);
}

absl::StatusOr<proto::ClusterView> CoordinatorClient::Register() {
  const proto::RegisterRequest req = RegisterBody(/*resume=*/false);
  absl::Time give_up = absl::Now() + options_.connect_timeout;
  absl::Duration backoff = kFirstRegisterBackoff;
  absl::Duration attempt = kFirstRegisterAttempt;
  absl::Status last;
  bool warned = false;
  while (true) {
    absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    RpcFuture f = node_->Call(peer_, proto::Encode(MakeHeader(MsgType::kRegister), req),
                              absl::Now() + std::min(left, attempt));
    auto d = DecodeReply(f.Wait(), absl::StrCat("register (coordinator ", options_.coordinator, ")"));
    attempt = std::min(attempt * 2, kMaxRegisterAttempt);
    if (d.ok()) {
      PS_ASSIGN_OR_RETURN(proto::ClusterView view, d->body<proto::ClusterView>());
      rank_ = view.your_rank;
      epoch_ = view.epoch;
      journaled_ = view.journaled;
      last_contact_ns_ = absl::ToUnixNanos(absl::Now());
      return view;
    }
    last = d.status();
    if (last.code() == absl::StatusCode::kOutOfRange) return NothingLeftToDo(last.message());
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
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded([&] {
                        Header again = MakeHeader(MsgType::kGetCluster);
                        again.step = h.step;
                        return proto::EncodeHeaderOnly(again);
                      },
                      timeout + kWaitReplySlack, "wait for cluster"));
  PS_ASSIGN_OR_RETURN(proto::ClusterView view, d.body<proto::ClusterView>());
  epoch_ = view.epoch;
  return view;
}

absl::StatusOr<proto::TableLayout> CoordinatorClient::DefineTables(
    const std::vector<TableSpec>& tables, absl::Duration timeout) {
  proto::DefineTablesRequest req;
  req.tables = tables;
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded([&] { return proto::Encode(MakeHeader(MsgType::kDefineTables), req); },
                                             timeout, "define tables"));
  return d.body<proto::TableLayout>();
}

absl::StatusOr<proto::Recovered> CoordinatorClient::WaitForRecovery(uint64_t epoch,
                                                                   absl::Duration wait) {
  proto::WaitRecoveryRequest req{epoch, absl::ToInt64Milliseconds(wait)};
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded([&] { return proto::Encode(MakeHeader(MsgType::kWaitRecovery), req); },
                                             wait + options_.recovery_timeout,
                                             "wait for recovery"));
  PS_ASSIGN_OR_RETURN(proto::Recovered r, d.body<proto::Recovered>());
  epoch_ = r.epoch;
  return r;
}

absl::StatusOr<proto::ShardClaim> CoordinatorClient::ClaimShard() {
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded([&] { return proto::EncodeHeaderOnly(MakeHeader(MsgType::kClaimShard)); },
                                             options_.call_timeout, "claim a shard"));
  return d.body<proto::ShardClaim>();
}

absl::StatusOr<proto::Rejoin> CoordinatorClient::Rejoin() {
  PS_ASSIGN_OR_RETURN(Decoded d, CallDecoded([&] { return proto::EncodeHeaderOnly(MakeHeader(MsgType::kRejoin)); },
                                             std::max(options_.call_timeout, kRejoinTimeout),
                                             "rejoin"));
  return d.body<proto::Rejoin>();
}

absl::Status CoordinatorClient::Barrier(const std::string& name, int participants,
                                        absl::Duration timeout) {
  proto::BarrierRequest req{name, participants};
  auto header = [&] {
    Header h = MakeHeader(MsgType::kBarrier);
    h.step = std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout));  // the coordinator's wait
    return h;
  };
  // The coordinator answers when its wait ends: the call waits a little longer.
  return CallDecoded([&] { return proto::Encode(header(), req); }, timeout + options_.call_timeout,
                     absl::StrCat("barrier ", name))
      .status();
}

absl::Status CoordinatorClient::WaitAtBarrier(const std::string& name, int participants,
                                              absl::Duration timeout, const std::string& what,
                                              const std::function<absl::Status()>& between) {
  constexpr absl::Duration kSlice = absl::Seconds(1);
  const absl::Time start = absl::Now();
  absl::Duration log_after = absl::Seconds(5);
  while (true) {
    const absl::Duration left = start + timeout - absl::Now();
    absl::Status st = Barrier(name, participants, std::max(absl::Milliseconds(1), std::min(kSlice, left)));
    if (st.ok() || !absl::IsDeadlineExceeded(st)) return st;
    // The coordinator's words, without the call's prefixes.
    std::string why(st.message());
    if (size_t k = why.rfind(absl::StrCat("barrier ", name, ":")); k != std::string::npos) {
      why = why.substr(k);
    }
    const absl::Duration waited = absl::Now() - start;
    if (waited >= timeout) {
      return absl::DeadlineExceededError(
          absl::StrCat("waited ", absl::FormatDuration(timeout), " for ", what, ": ", why));
    }
    if (waited >= log_after) {
      spdlog::info("waiting for {} ({:.0f} s so far): {}", what, absl::ToDoubleSeconds(waited), why);
      log_after = std::min(log_after * 2, log_after + absl::Minutes(1));
    }
    if (between) PS_RETURN_IF_ERROR(between());
  }
}

absl::Status CoordinatorClient::StoreSet(const std::string& key, Buffer value) {
  proto::StoreRequest req;
  req.keys = {key};
  return CallDecoded([&] {
                       return proto::Encode(MakeHeader(MsgType::kStoreSet), req, {value},
                                            {proto::DType::kU8});
                     },
                     options_.call_timeout, absl::StrCat("store set ", key))
      .status();
}

absl::StatusOr<Buffer> CoordinatorClient::StoreGet(const std::string& key, absl::Duration wait) {
  proto::StoreRequest req;
  req.keys = {key};
  req.wait_ms = absl::ToInt64Milliseconds(wait);
  PS_ASSIGN_OR_RETURN(Decoded d,
                      CallDecoded([&] { return proto::Encode(MakeHeader(MsgType::kStoreGet), req); },
                                  wait + options_.call_timeout, absl::StrCat("store get ", key)));
  PS_RETURN_IF_ERROR(d.CheckPayload(0, proto::DType::kU8));
  return d.payload(0);
}

absl::Status CoordinatorClient::WorkerDone() {
  done_reported_ = true;
  // Quick attempts first: the job may end with this report, and a reply
  // lost as the coordinator stops (it answers repeats for kFinishLinger
  // after the end) is asked again within a second instead of the worker
  // waiting out LostAfter for a coordinator that has gone. The report is
  // idempotent.
  for (int attempt = 0; attempt < kDoneAttempts; ++attempt) {
    absl::StatusOr<Message> reply =
        node_->Call(peer_, proto::EncodeHeaderOnly(MakeHeader(MsgType::kWorkerDone)),
                    absl::Now() + kDoneAttempt)
            .Wait();
    if (reply.ok() || !NoAnswer(reply.status())) {
      return DecodeReply(std::move(reply), "worker done").status();
    }
  }
  return CallDecoded([&] { return proto::EncodeHeaderOnly(MakeHeader(MsgType::kWorkerDone)); },
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
      Decoded d, CallDecoded([&] {
                   return proto::Encode(MakeHeader(MsgType::kCheckpointArrive), req, payloads, types);
                 },
                             options_.checkpoint_timeout, absl::StrCat("checkpoint at step ", step)));
  return d.body<proto::CheckpointDone>();
}

void CoordinatorClient::StartHeartbeats(absl::Duration interval,
                                        std::function<proto::Heartbeat()> fill) {
  fill_ = std::move(fill);
  if (heartbeating_.exchange(true)) return;
  std::weak_ptr<Life> life = life_;
  node_->transport().Post([this, interval, life] {
    RunIfAlive(life, [&] { HeartbeatTick(interval); });
  });
}

void CoordinatorClient::StopHeartbeats() { heartbeating_ = false; }

void CoordinatorClient::HeartbeatTick(absl::Duration interval) {
  // Runs inside RunIfAlive.
  if (!heartbeating_) return;
  std::weak_ptr<Life> life = life_;
  const bool reconnect = options_.reconnect_timeout > absl::ZeroDuration();
  if (reconnect && !gave_up_.load()) {
    if (lost_.load()) {
      Reregister(interval);
    } else if (absl::Now() - last_contact() > LostAfter(interval)) {
      OnLost(absl::StrCat("no answer for ", absl::FormatDuration(absl::Trunc(
                                                absl::Now() - last_contact(), absl::Milliseconds(100)))));
      Reregister(interval);
    }
  }
  if (!lost_.load() && !gave_up_.load()) {
    proto::Heartbeat hb = fill_ ? fill_() : proto::Heartbeat{};
    // Fire and forget: a missed reply only matters to the coordinator.
    node_->Call(peer_, proto::Encode(MakeHeader(MsgType::kHeartbeat), hb), absl::Now() + interval * 2)
        .OnDone([this, life, reconnect](const absl::StatusOr<Message>& reply) {
          RunIfAlive(life, [&] {
            auto d = proto::DecodeReply(reply, "heartbeat");
            if (d.ok()) {
              last_contact_ns_ = absl::ToUnixNanos(absl::Now());
            } else if (reconnect && reply.ok() &&
                       d.status().code() == absl::StatusCode::kNotFound && heartbeating_.load()) {
              // A coordinator that does not know this node: a restarted one.
              OnLost("a coordinator answered that this node is not registered (restarted?)");
            }
          });
        });
  }
  node_->transport().RunAfter(interval, [this, interval, life] {
    RunIfAlive(life, [&] { HeartbeatTick(interval); });
  });
}

void CoordinatorClient::OnLost(const std::string& why) {
  if (done_reported_.load() && !journaled_.load()) {
    // Most likely it had the report, ended the job and exited; and without
    // a journal no coordinator can take the job back: nothing to wait for.
    GiveUp(NothingLeftToDo(absl::StrCat(
        "lost the coordinator at ", options_.coordinator, " (", why,
        ") after this worker reported its end; it keeps no journal, so no coordinator can "
        "take the job back: this worker's part is done")));
    return;
  }
  if (lost_.exchange(true)) return;
  lost_since_ns_ = absl::ToUnixNanos(absl::Now());
  next_register_ = absl::Now();
  register_backoff_ = kFirstRegisterBackoff * 4;
  spdlog::warn("lost the coordinator at {} ({}): keeping this node's state and registering again "
               "as {} {} (for up to {})",
               options_.coordinator, why, proto::RoleName(options_.role), rank_.load(),
               absl::FormatDuration(options_.reconnect_timeout));
  // What waits on the old coordinator will get no answer: re-issued later.
  node_->FailPending(peer_, absl::UnavailableError("the coordinator was lost"));
}

void CoordinatorClient::Reregister(absl::Duration interval) {
  const absl::Time now = absl::Now();
  const absl::Duration lost_for = now - absl::FromUnixNanos(lost_since_ns_.load());
  if (lost_for > options_.reconnect_timeout) {
    const std::string secs = absl::FormatDuration(absl::Trunc(lost_for, absl::Seconds(1)));
    GiveUp(absl::UnavailableError(
        journaled_.load()
            ? absl::StrCat("coordinator ", options_.coordinator, " lost for ", secs,
                           " and no coordinator took this node back: giving up")
            : absl::StrCat("coordinator ", options_.coordinator, " lost for ", secs,
                           " and it keeps no journal (no --checkpoint_dir): the job cannot be "
                           "resumed")));
    return;
  }
  if (reregistering_ || now < next_register_) return;
  reregistering_ = true;
  next_register_ = now + register_backoff_;
  register_backoff_ = std::min(register_backoff_ * 2, kMaxRegisterBackoff);
  std::weak_ptr<Life> life = life_;
  node_->Call(peer_, proto::Encode(MakeHeader(MsgType::kRegister), RegisterBody(/*resume=*/true)),
              now + std::max(interval * 2, kFirstRegisterAttempt))
      .OnDone([this, life](const absl::StatusOr<Message>& reply) {
        RunIfAlive(life, [&] {
          reregistering_ = false;
          auto d = proto::DecodeReply(reply, absl::StrCat("register again (coordinator ",
                                                          options_.coordinator, ")"));
          absl::StatusOr<proto::ClusterView> view =
              d.ok() ? d->body<proto::ClusterView>() : absl::StatusOr<proto::ClusterView>(d.status());
          if (!view.ok()) {
            // No answer: try again. An answer refusing this node: the end
            // (a clean one when the job has finished meanwhile).
            if (!reply.ok()) return;
            GiveUp(view.status().code() == absl::StatusCode::kOutOfRange
                       ? NothingLeftToDo(view.status().message())
                       : view.status());
            return;
          }
          journaled_ = view->journaled;
          last_contact_ns_ = absl::ToUnixNanos(absl::Now());
          ++registrations_;
          lost_ = false;
          spdlog::info("registered again with the coordinator at {} as {} {} (lost for {}): going on",
                       options_.coordinator, proto::RoleName(options_.role), view->your_rank,
                       absl::FormatDuration(absl::Trunc(
                           absl::Now() - absl::FromUnixNanos(lost_since_ns_.load()),
                           absl::Milliseconds(10))));
        });
      });
}

void CoordinatorClient::GiveUp(absl::Status why) {
  if (gave_up_.exchange(true)) return;
  {
    absl::MutexLock lock(&mu_);
    give_up_status_ = why;
  }
  if (IsNothingLeftToDo(why)) {
    spdlog::info("{}", std::string(why.message()));
  } else {
    spdlog::error("{}", why.ToString());
  }
  node_->FailPending(peer_, why);
  if (options_.on_gave_up) options_.on_gave_up(why);
}

}  // namespace pstrain
