#include "bench/zmq_bench.h"

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "common/cpu_affinity.h"
#include "common/zmq_check.h"

namespace pstrain::bench {
namespace {

constexpr int kWarmupIterations = 20;

// A frame that points at `data` without copying or freeing it (the caller
// keeps the bytes alive and unchanged while ZeroMQ sends them).
zmq::message_t ConstFrame(const std::vector<uint8_t>& data) {
  return zmq::message_t(const_cast<uint8_t*>(data.data()), data.size(), nullptr, nullptr);
}

// Echo server: answers each request with `reply` until `stop`.
absl::Status Serve(zmq::context_t& ctx, const std::vector<uint8_t>& reply,
                   std::atomic<bool>& stop, std::string* endpoint, std::atomic<bool>& bound) {
  zmq::socket_t router;
  try {
    router = zmq::socket_t(ctx, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.set(zmq::sockopt::rcvtimeo, 100);
    router.set(zmq::sockopt::sndhwm, 0);
    router.bind("tcp://127.0.0.1:*");
    *endpoint = router.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    bound = true;
    return internal::ZmqError(e, "zmq bench: bind", __FILE__, __LINE__);
  }
  bound = true;
  try {
    while (!stop.load(std::memory_order_relaxed)) {
      zmq::message_t id, payload;
      if (!router.recv(id, zmq::recv_flags::none)) continue;  // timeout
      (void)router.recv(payload, zmq::recv_flags::none);
      zmq::message_t out = ConstFrame(reply);
      router.send(id, zmq::send_flags::sndmore);
      router.send(out, zmq::send_flags::none);
    }
  } catch (const zmq::error_t& e) {
    return internal::ZmqError(e, "zmq bench: serve", __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

// The client: round trips of `request` until options.seconds have passed.
absl::Status RunClient(zmq::context_t& ctx, const std::string& endpoint,
                       const ZmqBenchOptions& options, const std::vector<uint8_t>& request,
                       ZmqBenchResult* result) {
  try {
    zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::sndhwm, 0);
    dealer.connect(endpoint);
    auto round_trip = [&] {
      zmq::message_t out = ConstFrame(request), in;
      dealer.send(out, zmq::send_flags::none);
      (void)dealer.recv(in, zmq::recv_flags::none);
      return in.size() == options.bytes;
    };
    bool ok = true;
    for (int i = 0; i < kWarmupIterations; ++i) ok &= round_trip();
    const auto start = Clock::now();
    while (ok) {
      const auto t0 = Clock::now();
      ok = round_trip();
      const auto t1 = Clock::now();
      result->latency_us.Add(std::chrono::duration<double, std::micro>(t1 - t0).count());
      ++result->iterations;
      if (std::chrono::duration<double>(t1 - start).count() >= options.seconds) break;
    }
    result->seconds = SecondsSince(start);
    if (!ok) return absl::InternalError("zmq bench: reply of the wrong size");
  } catch (const zmq::error_t& e) {
    return internal::ZmqError(e, "zmq bench: round trip", __FILE__, __LINE__);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ZmqBenchResult> RunZmqBench(const ZmqBenchOptions& options) {
  std::vector<uint8_t> request(options.bytes, 0x5a), reply(options.bytes, 0xa5);
  auto client_ctx = std::make_unique<zmq::context_t>(1);
  std::unique_ptr<zmq::context_t> server_ctx_owned;
  zmq::context_t* server_ctx = client_ctx.get();
  if (options.contexts >= 2) {
    server_ctx_owned = std::make_unique<zmq::context_t>(1);
    server_ctx = server_ctx_owned.get();
  }
  std::atomic<bool> stop{false}, bound{false};
  std::string endpoint;
  absl::Status server_status;
  if (options.contexts >= 2) {
    for (int cpu : options.server_cpus) zmq_ctx_set(server_ctx->handle(), ZMQ_THREAD_AFFINITY_CPU_ADD, cpu);
    for (int cpu : options.client_cpus) zmq_ctx_set(client_ctx->handle(), ZMQ_THREAD_AFFINITY_CPU_ADD, cpu);
  }
  std::thread server([&] {
    if (!options.server_cpus.empty()) (void)PinCurrentThread(options.server_cpus);
    server_status = Serve(*server_ctx, reply, stop, &endpoint, bound);
  });
  while (!bound.load()) std::this_thread::yield();
  if (endpoint.empty()) {
    server.join();
    return server_status;
  }

  ZmqBenchResult result;
  absl::Status client_status;
  std::thread client([&] {
    if (!options.client_cpus.empty()) (void)PinCurrentThread(options.client_cpus);
    client_status = RunClient(*client_ctx, endpoint, options, request, &result);
  });
  client.join();
  stop = true;
  server.join();
  PS_RETURN_IF_ERROR(client_status);
  PS_RETURN_IF_ERROR(server_status);
  result.gbps = 2.0 * static_cast<double>(options.bytes) * static_cast<double>(result.iterations) /
                result.seconds / 1e9;
  return result;
}

}  // namespace pstrain::bench
