#include "common/rpc.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace pstrain {

struct RpcFuture::State {
  mutable absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<Message> result ABSL_GUARDED_BY(mu) = absl::UnknownError("pending");
  std::vector<Callback> callbacks ABSL_GUARDED_BY(mu);
};

absl::StatusOr<Message> RpcFuture::Wait() const {
  if (!state_) return absl::FailedPreconditionError("Wait on an empty future");
  absl::MutexLock lock(&state_->mu);
  state_->mu.Await(absl::Condition(&state_->done));
  return state_->result;
}

bool RpcFuture::Ready() const {
  if (!state_) return false;
  absl::MutexLock lock(&state_->mu);
  return state_->done;
}

void RpcFuture::OnDone(Callback fn) const {
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(fn));
      return;
    }
  }
  absl::StatusOr<Message> result;
  {
    absl::MutexLock lock(&state_->mu);
    result = state_->result;
  }
  fn(result);
}

RpcFuture RpcFuture::Completed(absl::StatusOr<Message> result) {
  auto state = std::make_shared<State>();
  Complete(*state, std::move(result));
  return RpcFuture(std::move(state));
}

void RpcFuture::Complete(State& state, absl::StatusOr<Message> result) {
  std::vector<Callback> callbacks;
  {
    absl::MutexLock lock(&state.mu);
    if (state.done) return;
    state.result = std::move(result);
    state.done = true;
    callbacks.swap(state.callbacks);
  }
  if (callbacks.empty()) return;
  absl::StatusOr<Message> copy;
  {
    absl::MutexLock lock(&state.mu);
    copy = state.result;
  }
  for (auto& cb : callbacks) cb(copy);
}

RpcNode::RpcNode(std::unique_ptr<Transport> transport) : transport_(std::move(transport)) {}

RpcNode::~RpcNode() { Stop(); }

absl::Status RpcNode::Start(RequestHandler handler) {
  handler_ = std::move(handler);
  started_ = true;
  return transport_->Start([this](Incoming&& in) { OnMessage(std::move(in)); },
                           [this](PeerId peer, uint64_t id, absl::Status st) {
                             OnSendFailure(peer, id, std::move(st));
                           });
}

void RpcNode::Stop() {
  if (!started_.exchange(false)) return;
  // Fail what is pending on the I/O thread, then stop it.
  absl::Notification done;
  transport_->Post([this, &done] {
    for (auto& [id, p] : pending_) {
      RpcFuture::Complete(*p.state, absl::CancelledError("rpc node stopped"));
    }
    pending_.clear();
    done.Notify();
  });
  done.WaitForNotificationWithTimeout(absl::Seconds(5));
  transport_->Stop();
}

PeerId RpcNode::Connect(const std::string& endpoint) {
  PeerId id = transport_->Connect(endpoint);
  absl::MutexLock lock(&endpoints_mu_);
  if (static_cast<size_t>(id) >= endpoints_.size()) endpoints_.resize(id + 1);
  endpoints_[id] = endpoint;
  return id;
}

const std::string& RpcNode::PeerEndpoint(PeerId peer) const {
  static const std::string kUnknown = "(unknown peer)";
  absl::MutexLock lock(&endpoints_mu_);
  if (peer < 0 || static_cast<size_t>(peer) >= endpoints_.size()) return kUnknown;
  return endpoints_[peer];
}

RpcFuture RpcNode::Call(PeerId peer, Message request, absl::Time deadline) {
  auto state = std::make_shared<RpcFuture::State>();
  uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  calls_.fetch_add(1, std::memory_order_relaxed);
  Pending pending{state, std::move(request), peer, deadline, absl::Milliseconds(2)};
  if (transport_->InIoThread()) {
    StartCall(id, std::move(pending));
  } else {
    transport_->Post([this, id, p = std::move(pending)]() mutable { StartCall(id, std::move(p)); });
  }
  return RpcFuture(std::move(state));
}

void RpcNode::StartCall(uint64_t id, Pending pending) {
  if (!started_) {
    RpcFuture::Complete(*pending.state, absl::CancelledError("rpc node stopped"));
    return;
  }
  absl::Time deadline = pending.deadline;
  PeerId peer = pending.peer;
  Message copy = pending.message;
  pending_.emplace(id, std::move(pending));
  if (deadlines_.size() > 1024 && deadlines_.size() > 4 * pending_.size()) {
    // Most entries belong to calls that already finished: rebuild.
    decltype(deadlines_) fresh;
    for (const auto& [pid, p] : pending_) fresh.push({p.deadline, pid});
    deadlines_.swap(fresh);
  }
  deadlines_.push({deadline, id});
  ArmSweep(deadline);
  transport_->SendRequest(peer, id, std::move(copy));
}

void RpcNode::OnMessage(Incoming&& in) {
  if (in.envelope.kind == EnvelopeKind::kRequest) {
    if (handler_) handler_(RpcRequest{in.envelope.request_id, std::move(in.reply_route),
                                      std::move(in.message)});
    return;
  }
  auto it = pending_.find(in.envelope.request_id);
  if (it == pending_.end()) {
    stale_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::shared_ptr<RpcFuture::State> state = std::move(it->second.state);
  pending_.erase(it);
  RpcFuture::Complete(*state, std::move(in.message));
}

void RpcNode::OnSendFailure(PeerId peer, uint64_t id, absl::Status status) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  Pending& p = it->second;
  absl::Time now = absl::Now();
  if (now + p.backoff >= p.deadline) {
    std::shared_ptr<RpcFuture::State> state = std::move(p.state);
    pending_.erase(it);
    RpcFuture::Complete(*state, absl::UnavailableError(absl::StrCat(
                                    status.message(), " (gave up at the call's deadline)")));
    return;
  }
  absl::Duration wait = p.backoff;
  p.backoff = std::min(p.backoff * 2, absl::Milliseconds(200));
  resends_.fetch_add(1, std::memory_order_relaxed);
  transport_->RunAfter(wait, [this, id] {
    auto again = pending_.find(id);
    if (again == pending_.end()) return;
    transport_->SendRequest(again->second.peer, id, again->second.message);
  });
}

void RpcNode::ArmSweep(absl::Time when) {
  if (when >= armed_) return;
  armed_ = when;
  transport_->RunAfter(when - absl::Now(), [this] { Sweep(); });
}

void RpcNode::Sweep() {
  absl::Time now = absl::Now();
  armed_ = absl::InfiniteFuture();
  while (!deadlines_.empty() && deadlines_.top().when <= now) {
    DeadlineEntry e = deadlines_.top();
    deadlines_.pop();
    auto it = pending_.find(e.id);
    if (it == pending_.end() || it->second.deadline != e.when) continue;
    std::shared_ptr<RpcFuture::State> state = std::move(it->second.state);
    std::string endpoint = PeerEndpoint(it->second.peer);
    pending_.erase(it);
    deadline_exceeded_.fetch_add(1, std::memory_order_relaxed);
    RpcFuture::Complete(*state, absl::DeadlineExceededError(
                                    absl::StrCat("no reply from ", endpoint, " by the deadline")));
  }
  // Drop entries of calls that already finished so the heap stays small.
  while (!deadlines_.empty() && !pending_.contains(deadlines_.top().id)) deadlines_.pop();
  if (!deadlines_.empty()) ArmSweep(deadlines_.top().when);
}

RpcStats RpcNode::stats() const {
  RpcStats s;
  s.calls = calls_.load();
  s.deadline_exceeded = deadline_exceeded_.load();
  s.resends = resends_.load();
  s.stale_responses = stale_.load();
  return s;
}

}  // namespace pstrain
