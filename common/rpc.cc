#include "common/rpc.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"

namespace pstrain {

struct RpcFuture::State {
  mutable absl::Mutex mu;
  bool done ABSL_GUARDED_BY(mu) = false;
  absl::StatusOr<Message> result ABSL_GUARDED_BY(mu) = absl::UnknownError("pending");
  std::vector<Callback> callbacks ABSL_GUARDED_BY(mu);
  // Where the reply comes from, for a waiter that receives it itself.
  CallerDrivenIo* driver = nullptr;
  PeerId peer = kNoPeer;
  absl::Time deadline;
  // The guest waiting on this call (if any): completing it elsewhere wakes it.
  GuestWake guest ABSL_GUARDED_BY(mu);
};

absl::StatusOr<Message> RpcFuture::Wait() const {
  if (!state_) return absl::FailedPreconditionError("Wait on an empty future");
  State& st = *state_;
  if (st.driver != nullptr) {
    const GuestWake wake = GuestWake::OfThisThread();
    bool guest = false;
    {
      absl::MutexLock lock(&st.mu);
      if (!st.done && !st.guest.valid() && wake.valid()) {
        st.guest = wake;
        guest = true;
      }
    }
    bool received = false;
    if (guest) {
      received = st.driver->ReceiveAsGuest(
          st.peer,
          [&st] {
            absl::MutexLock lock(&st.mu);
            return st.done;
          },
          wake, st.deadline);
      absl::MutexLock lock(&st.mu);
      st.guest = GuestWake();
    }
    // The request may still be held back: it must leave before we block.
    if (!received) st.driver->FlushCalls();
  }
  absl::MutexLock lock(&st.mu);
  st.mu.Await(absl::Condition(&st.done));
  return st.result;
}

bool RpcFuture::Ready() const {
  if (!state_) return false;
  if (state_->driver != nullptr) state_->driver->FlushCalls();  // or it may never be
  absl::MutexLock lock(&state_->mu);
  return state_->done;
}

void RpcFuture::OnDone(Callback fn) const {
  bool queued = false;
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->done) {
      state_->callbacks.push_back(std::move(fn));
      queued = true;
    }
  }
  if (queued) {
    // Nobody may wait for this call: its request must leave now.
    if (state_->driver != nullptr) state_->driver->FlushCalls();
    return;
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
  GuestWake guest;
  {
    absl::MutexLock lock(&state.mu);
    if (state.done) return;
    state.result = std::move(result);
    state.done = true;
    callbacks.swap(state.callbacks);
    guest = state.guest;
  }
  guest.Notify();  // its wait ends (unless this thread is that guest)
  if (callbacks.empty()) return;
  absl::StatusOr<Message> copy;
  {
    absl::MutexLock lock(&state.mu);
    copy = state.result;
  }
  for (auto& cb : callbacks) cb(copy);
}

RpcNode::RpcNode(std::unique_ptr<Transport> transport)
    : transport_(std::move(transport)),
      driver_(dynamic_cast<CallerDrivenIo*>(transport_.get())) {}

RpcNode::~RpcNode() { Stop(); }

absl::Status RpcNode::Start(RequestHandler handler) {
  handler_ = std::move(handler);
  {
    absl::MutexLock lock(&mu_);
    stopped_ = false;
  }
  started_ = true;
  return transport_->Start([this](Incoming&& in) { OnMessage(std::move(in)); },
                           [this](PeerId peer, uint64_t id, absl::Status st) {
                             OnSendFailure(peer, id, std::move(st));
                           });
}

void RpcNode::Stop() {
  if (!started_.exchange(false)) return;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;  // calls from now on fail at once
  }
  if (driver_ != nullptr) driver_->FlushCalls();
  // Fail what is pending on the I/O thread (where callbacks run), then stop it.
  absl::Notification done;
  transport_->Post([this, &done] {
    std::vector<std::shared_ptr<RpcFuture::State>> states;
    {
      absl::MutexLock lock(&mu_);
      for (auto& [id, p] : pending_) states.push_back(std::move(p.state));
      pending_.clear();
    }
    for (auto& st : states) RpcFuture::Complete(*st, absl::CancelledError("rpc node stopped"));
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
  state->driver = driver_;
  state->peer = peer;
  state->deadline = deadline;
  uint64_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
  calls_.fetch_add(1, std::memory_order_relaxed);
  bool sweep = false;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      RpcFuture::Complete(*state, absl::CancelledError("rpc node stopped"));
      return RpcFuture(std::move(state));
    }
    if (fenced_ && peer != fence_spared_) {
      RpcFuture::Complete(*state, fence_status_);
      return RpcFuture(std::move(state));
    }
    // The request is kept for resends until the call ends.
    pending_.emplace(id, Pending{state, request, peer, deadline, absl::Milliseconds(2)});
    if (deadlines_.size() > 1024 && deadlines_.size() > 4 * pending_.size()) {
      // Most entries belong to calls that already finished: rebuild.
      decltype(deadlines_) fresh;
      for (const auto& [pid, p] : pending_) fresh.push({p.deadline, pid});
      deadlines_.swap(fresh);
    }
    deadlines_.push({deadline, id});
    sweep = NeedSweepBy(deadline);
  }
  if (sweep) ScheduleSweep(deadline);
  transport_->SendRequest(peer, id, std::move(request));
  return RpcFuture(std::move(state));
}

void RpcNode::Fence(PeerId spared, absl::Status why) {
  std::vector<std::shared_ptr<RpcFuture::State>> states;
  {
    absl::MutexLock lock(&mu_);
    fenced_ = true;
    fence_spared_ = spared;
    fence_status_ = why;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.peer == spared) {
        ++it;
        continue;
      }
      states.push_back(std::move(it->second.state));
      pending_.erase(it++);
    }
  }
  for (auto& st : states) RpcFuture::Complete(*st, why);
}

void RpcNode::FailPending(PeerId peer, absl::Status why) {
  std::vector<std::shared_ptr<RpcFuture::State>> states;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.peer != peer) {
        ++it;
        continue;
      }
      states.push_back(std::move(it->second.state));
      pending_.erase(it++);
    }
  }
  for (auto& st : states) RpcFuture::Complete(*st, why);
}

void RpcNode::Unfence() {
  absl::MutexLock lock(&mu_);
  fenced_ = false;
  fence_status_ = absl::OkStatus();
}

void RpcNode::OnMessage(Incoming&& in) {
  if (in.envelope.kind == EnvelopeKind::kRequest) {
    if (handler_) handler_(RpcRequest{in.envelope.request_id, std::move(in.reply_route),
                                      std::move(in.message)});
    return;
  }
  std::shared_ptr<RpcFuture::State> state;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(in.envelope.request_id);
    if (it == pending_.end()) {
      stale_.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    state = std::move(it->second.state);
    pending_.erase(it);
  }
  RpcFuture::Complete(*state, std::move(in.message));
}

void RpcNode::OnSendFailure(PeerId peer, uint64_t id, absl::Status status) {
  std::shared_ptr<RpcFuture::State> failed;
  absl::Duration wait;
  {
    absl::MutexLock lock(&mu_);
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    absl::Time now = absl::Now();
    if (now + p.backoff >= p.deadline) {
      failed = std::move(p.state);
      pending_.erase(it);
    } else {
      wait = p.backoff;
      p.backoff = std::min(p.backoff * 2, absl::Milliseconds(200));
    }
  }
  if (failed) {
    RpcFuture::Complete(*failed, absl::UnavailableError(absl::StrCat(
                                     status.message(), " (gave up at the call's deadline)")));
    return;
  }
  resends_.fetch_add(1, std::memory_order_relaxed);
  transport_->RunAfter(wait, [this, id] {
    Message again;
    PeerId to = kNoPeer;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(id);
      if (it == pending_.end()) return;
      again = it->second.message;
      to = it->second.peer;
    }
    transport_->SendRequest(to, id, std::move(again));
  });
}

bool RpcNode::NeedSweepBy(absl::Time when) {
  if (when >= armed_) return false;
  armed_ = when;
  return true;
}

void RpcNode::ScheduleSweep(absl::Time when) {
  transport_->RunAfter(when - absl::Now(), [this] { Sweep(); });
}

void RpcNode::Sweep() {
  absl::Time now = absl::Now();
  std::vector<std::pair<std::shared_ptr<RpcFuture::State>, PeerId>> expired;
  absl::Time next = absl::InfiniteFuture();
  {
    absl::MutexLock lock(&mu_);
    armed_ = absl::InfiniteFuture();
    while (!deadlines_.empty() && deadlines_.top().when <= now) {
      DeadlineEntry e = deadlines_.top();
      deadlines_.pop();
      auto it = pending_.find(e.id);
      if (it == pending_.end() || it->second.deadline != e.when) continue;
      expired.emplace_back(std::move(it->second.state), it->second.peer);
      pending_.erase(it);
    }
    // Drop entries of calls that already finished so the heap stays small.
    while (!deadlines_.empty() && !pending_.contains(deadlines_.top().id)) deadlines_.pop();
    if (!deadlines_.empty() && NeedSweepBy(deadlines_.top().when)) next = deadlines_.top().when;
  }
  for (auto& [state, peer] : expired) {
    deadline_exceeded_.fetch_add(1, std::memory_order_relaxed);
    RpcFuture::Complete(*state, absl::DeadlineExceededError(absl::StrCat(
                                    "no reply from ", PeerEndpoint(peer), " by the deadline")));
  }
  if (next != absl::InfiniteFuture()) ScheduleSweep(next);
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
