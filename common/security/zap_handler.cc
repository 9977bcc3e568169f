#include "common/security/zap_handler.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "common/zmq_check.h"

namespace pstrain {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";
constexpr char kZapVersion[] = "1.0";
// Frames of a request: version, request id, domain, address, routing id,
// mechanism, then the mechanism's credentials (CURVE: the client's 32-byte
// public key).
constexpr size_t kZapRequestFrames = 6;
constexpr size_t kCurveKeyBytes = 32;
constexpr absl::Duration kLogEvery = absl::Seconds(1);
// Longest poll: the thread re-checks for a stop this often even without one.
constexpr std::chrono::milliseconds kPollWait{1000};

std::string ToString(const zmq::message_t& m) {
  return std::string(static_cast<const char*>(m.data()), m.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::Start(
    zmq::context_t& context, const std::vector<std::string>& allowed, std::string name) {
  zmq::socket_t socket;
  PS_ZMQ_CHECK(socket = zmq::socket_t(context, zmq::socket_type::rep));
  PS_ZMQ_CHECK(socket.set(zmq::sockopt::linger, 0));
  PS_ZMQ_CHECK(socket.bind(kZapEndpoint));
  int stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd < 0) return ErrnoToStatus(errno, "eventfd for the ZAP handler");
  absl::flat_hash_set<std::string> set(allowed.begin(), allowed.end());
  std::unique_ptr<ZapHandler> h(
      new ZapHandler(std::move(socket), std::move(set), std::move(name), stop_fd));
  h->thread_ = std::thread([p = h.get()] { p->Run(); });
  return h;
}

ZapHandler::ZapHandler(zmq::socket_t socket, absl::flat_hash_set<std::string> allowed,
                       std::string name, int stop_fd)
    : socket_(std::move(socket)), allowed_(std::move(allowed)), name_(std::move(name)),
      stop_fd_(stop_fd) {}

ZapHandler::~ZapHandler() {
  uint64_t one = 1;
  ssize_t n;
  do {
    n = write(stop_fd_, &one, sizeof(one));
  } while (n < 0 && errno == EINTR);
  if (thread_.joinable()) thread_.join();
  close(stop_fd_);
}

void ZapHandler::Run() {
  while (true) {
    zmq::pollitem_t items[] = {{static_cast<void*>(socket_), 0, ZMQ_POLLIN, 0},
                               {nullptr, stop_fd_, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, kPollWait);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR) spdlog::error("{}: ZAP handler poll: {}", name_, e.what());
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) break;
    if (items[0].revents & ZMQ_POLLIN) AnswerOne();
  }
  socket_.close();
}

void ZapHandler::AnswerOne() {
  std::vector<zmq::message_t> frames;
  try {
    do {
      zmq::message_t m;
      if (!socket_.recv(m, zmq::recv_flags::dontwait)) return;
      frames.push_back(std::move(m));
    } while (frames.back().more());
  } catch (const zmq::error_t& e) {
    spdlog::warn("{}: ZAP handler receive: {}", name_, e.what());
    return;
  }
  // A malformed request still gets a reply, or the REP socket would be
  // stuck waiting to send one.
  std::string request_id = frames.size() > 1 ? ToString(frames[1]) : "";
  std::string address = frames.size() > 3 ? ToString(frames[3]) : "?";
  std::string status = "400", text = "not authorized", why;
  if (frames.size() < kZapRequestFrames || ToString(frames[0]) != kZapVersion) {
    status = "500";
    text = "bad ZAP request";
    why = "malformed ZAP request";
  } else if (std::string mechanism = ToString(frames[5]); mechanism != "CURVE") {
    why = absl::StrCat("mechanism ", mechanism, " (CURVE required)");
  } else if (frames.size() != kZapRequestFrames + 1 || frames[6].size() != kCurveKeyBytes) {
    why = "CURVE request without a 32-byte public key";
  } else {
    char z85[41];
    zmq_z85_encode(z85, static_cast<const uint8_t*>(frames[6].data()), kCurveKeyBytes);
    if (allowed_.contains(z85)) {
      status = "200";
      text = "OK";
      admitted_.fetch_add(1, std::memory_order_relaxed);
      spdlog::debug("{}: admitted {} (key {})", name_, address, z85);
    } else {
      why = absl::StrCat("public key ", z85, " is not in authorized_keys");
    }
  }
  if (status != "200") {
    refused_.fetch_add(1, std::memory_order_relaxed);
    LogRefusal(address, why);
  }
  try {
    const std::string reply[] = {kZapVersion, request_id, status, text, "", ""};
    for (size_t i = 0; i < 6; ++i) {
      socket_.send(zmq::buffer(reply[i]), i + 1 < 6 ? zmq::send_flags::sndmore
                                                    : zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("{}: ZAP handler reply: {}", name_, e.what());
  }
}

void ZapHandler::LogRefusal(const std::string& address, const std::string& why) {
  absl::Time now = absl::Now();
  if (now - last_log_ < kLogEvery) {
    ++unlogged_;
    return;
  }
  last_log_ = now;
  std::string more =
      unlogged_ == 0 ? "" : absl::StrCat(" (and ", unlogged_, " more refusals since the last line)");
  unlogged_ = 0;
  spdlog::warn("{}: refused a connection from {}: {}{}", name_, address, why, more);
}

}  // namespace pstrain
