#include "common/inproc_transport.h"

#include <poll.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

void InProcNetwork::SetDropFilter(
    std::function<bool(const std::string& to, const Incoming&)> filter) {
  absl::MutexLock lock(&mu_);
  drop_filter_ = std::move(filter);
}

bool InProcNetwork::Register(const std::string& endpoint, InProcTransport* t) {
  absl::MutexLock lock(&mu_);
  return endpoints_.emplace(endpoint, t).second;
}

void InProcNetwork::Unregister(const std::string& endpoint) {
  absl::MutexLock lock(&mu_);
  endpoints_.erase(endpoint);
}

bool InProcNetwork::Deliver(const std::string& endpoint, Incoming&& in) {
  absl::MutexLock lock(&mu_);
  auto it = endpoints_.find(endpoint);
  if (it == endpoints_.end()) return false;
  if (drop_filter_ && drop_filter_(endpoint, in)) return true;  // lost on the "wire"
  it->second->Receive(std::move(in));
  return true;
}

InProcTransport::InProcTransport(InProcNetwork* network) : network_(network) {}

InProcTransport::~InProcTransport() {
  if (!endpoint_.empty()) network_->Unregister(endpoint_);
  Stop();
}

absl::StatusOr<std::string> InProcTransport::Bind(const std::string& endpoint) {
  if (!endpoint_.empty()) return absl::FailedPreconditionError("already bound");
  if (!network_->Register(endpoint, this)) {
    return absl::AlreadyExistsError(absl::StrCat("endpoint in use: ", endpoint));
  }
  endpoint_ = endpoint;
  return endpoint;
}

absl::Status InProcTransport::Start(MessageHandler on_message,
                                    SendFailureHandler on_send_failure) {
  if (running_.exchange(true)) return absl::FailedPreconditionError("already started");
  if (endpoint_.empty()) {
    // Unbound clients still need an address for replies to come back to.
    endpoint_ = absl::StrCat("inproc-client-", reinterpret_cast<uintptr_t>(this));
    network_->Register(endpoint_, this);
  }
  on_message_ = std::move(on_message);
  on_send_failure_ = std::move(on_send_failure);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void InProcTransport::Stop() {
  if (!running_.exchange(false)) return;
  loop_.Post([] {});
  if (thread_.joinable()) thread_.join();
}

void InProcTransport::Run() {
  loop_.owner().BindToCurrentThread();
  // A single-owner loop: this thread holds it throughout, waits included.
  loop_.owner().BeginWork();
  while (running_.load(std::memory_order_relaxed)) {
    absl::Duration wait = loop_.TimeToNextTimer(absl::Milliseconds(200));
    pollfd pfd{loop_.wake_fd(), POLLIN, 0};
    int rc = poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(wait + absl::Microseconds(999))));
    loop_.RunPending(rc > 0);
    loop_.RunDueTimers();
  }
  loop_.RunPending(true);
  loop_.owner().StopWork();
}

PeerId InProcTransport::Connect(const std::string& endpoint) {
  absl::MutexLock lock(&peers_mu_);
  peers_.push_back(endpoint);
  return static_cast<PeerId>(peers_.size() - 1);
}

void InProcTransport::Disconnect(PeerId peer) {
  absl::MutexLock lock(&peers_mu_);
  if (peer >= 0 && static_cast<size_t>(peer) < peers_.size()) peers_[peer].clear();
}

void InProcTransport::Receive(Incoming&& in) {
  received_.fetch_add(1, std::memory_order_relaxed);
  loop_.Post([this, in = std::move(in)]() mutable {
    if (on_message_) on_message_(std::move(in));
  });
}

void InProcTransport::SendRequest(PeerId peer, uint64_t request_id, Message message) {
  std::string dest;
  {
    absl::MutexLock lock(&peers_mu_);
    if (peer >= 0 && static_cast<size_t>(peer) < peers_.size()) dest = peers_[peer];
  }
  Incoming in;
  in.envelope.kind = EnvelopeKind::kRequest;
  in.envelope.request_id = request_id;
  in.message = std::move(message);
  in.reply_route = absl::StrCat(peer, "|", endpoint_);
  sent_.fetch_add(1, std::memory_order_relaxed);
  if (dest.empty() || !network_->Deliver(dest, std::move(in))) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    Post([this, peer, request_id, dest] {
      if (on_send_failure_) {
        on_send_failure_(peer, request_id,
                         absl::UnavailableError(absl::StrCat("no endpoint ", dest)));
      }
    });
  }
}

void InProcTransport::SendResponse(const std::string& route, uint64_t request_id,
                                   Message message) {
  size_t bar = route.find('|');
  PeerId peer = kNoPeer;
  if (bar == std::string::npos || !absl::SimpleAtoi(route.substr(0, bar), &peer)) {
    failures_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Incoming in;
  in.envelope.kind = EnvelopeKind::kResponse;
  in.envelope.request_id = request_id;
  in.message = std::move(message);
  in.peer = peer;
  sent_.fetch_add(1, std::memory_order_relaxed);
  if (!network_->Deliver(route.substr(bar + 1), std::move(in))) {
    failures_.fetch_add(1, std::memory_order_relaxed);
  }
}

TransportStats InProcTransport::stats() const {
  TransportStats s;
  s.messages_sent = sent_.load();
  s.messages_received = received_.load();
  s.send_failures = failures_.load();
  return s;
}

}  // namespace pstrain
