#include "worker/allreduce/gloo_collective.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "absl/strings/str_cat.h"
#include "common/process.h"
#include "absl/strings/str_join.h"

namespace pstrain::worker {
namespace {

// Gloo's store interface on top of ours. Gloo reports store failures by
// exception, so this adapter throws gloo::IoException (caught in Create).
class StoreAdapter final : public gloo::rendezvous::Store {
 public:
  StoreAdapter(RendezvousStore* store, absl::Duration timeout) : store_(store), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    absl::Status st = store_->Set(key, std::string(data.begin(), data.end()));
    if (!st.ok()) throw gloo::IoException(std::string(st.message()));
  }

  std::vector<char> get(const std::string& key) override {
    auto v = store_->Get(key, timeout_);
    if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    return std::vector<char>(v->begin(), v->end());
  }

  void wait(const std::vector<std::string>& keys) override {
    wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
  }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    for (const std::string& k : keys) {
      auto v = store_->Get(k, absl::Milliseconds(timeout.count()));
      if (!v.ok()) throw gloo::IoException(std::string(v.status().message()));
    }
  }

 private:
  RendezvousStore* store_;
  absl::Duration timeout_;
};

std::chrono::milliseconds Millis(absl::Duration d) {
  return std::chrono::milliseconds(absl::ToInt64Milliseconds(d));
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooCollective>> GlooCollective::Create(const GlooOptions& options,
                                                                       RendezvousStore* store) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("gloo: rank ", options.rank, " outside a group of ", options.size));
  }
  IgnoreBrokenPipes();  // a peer gone mid-write: EPIPE, reported, not SIGPIPE
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.size);
    context->setTimeout(Millis(options.timeout));
    StoreAdapter adapter(store, options.timeout);
    gloo::rendezvous::PrefixStore prefixed(options.prefix, adapter);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<GlooCollective>(new GlooCollective(options, std::move(context)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("gloo: rank ", options.rank, " of ", options.size,
                                               " could not connect to its peers: ", e.what()));
  }
}

GlooCollective::~GlooCollective() = default;

absl::Status GlooCollective::Failure(const char* what, const std::exception& e) {
  broken_ = true;
  std::string blame;
  if (options_.probe) {
    std::vector<int> dead = options_.probe();
    if (!dead.empty()) blame = absl::StrCat("; rank(s) ", absl::StrJoin(dead, ", "), " not responding");
  }
  return absl::UnavailableError(absl::StrCat("gloo ", what, " failed on rank ", options_.rank, " of ",
                                             options_.size, blame, ": ", e.what()));
}

absl::Status GlooCollective::AllReduce(float* data, size_t n, ReduceOp op) {
  if (broken_) return absl::FailedPreconditionError("gloo group failed earlier");
  if (n == 0 || options_.size == 1) return absl::OkStatus();
  try {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(data, n);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts.setAlgorithm(options_.algorithm == GlooOptions::Algorithm::kRing
                          ? gloo::AllreduceOptions::Algorithm::RING
                          : gloo::AllreduceOptions::Algorithm::BCUBE);
    opts.setTag(tag_++);
    opts.setTimeout(Millis(options_.timeout));
    gloo::allreduce(opts);
  } catch (const std::exception& e) {
    return Failure("allreduce", e);
  }
  if (op == ReduceOp::kAverage) {
    float inv = 1.0f / static_cast<float>(options_.size);
    for (size_t i = 0; i < n; ++i) data[i] *= inv;
  }
  return absl::OkStatus();
}

absl::Status GlooCollective::Broadcast(float* data, size_t n, int root) {
  if (broken_) return absl::FailedPreconditionError("gloo group failed earlier");
  if (n == 0 || options_.size == 1) return absl::OkStatus();
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(data, n);
    opts.setRoot(root);
    opts.setTag(tag_++);
    opts.setTimeout(Millis(options_.timeout));
    gloo::broadcast(opts);
  } catch (const std::exception& e) {
    return Failure("broadcast", e);
  }
  return absl::OkStatus();
}

absl::Status GlooCollective::Barrier() {
  if (broken_) return absl::FailedPreconditionError("gloo group failed earlier");
  if (options_.size == 1) return absl::OkStatus();
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTag(tag_++);
    opts.setTimeout(Millis(options_.timeout));
    gloo::barrier(opts);
  } catch (const std::exception& e) {
    return Failure("barrier", e);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
