// GlooCollective: the Collective over Gloo's TCP transport, for buffers in
// host memory (CPU training, CI). Ranks meet through a RendezvousStore (the
// coordinator in a job), so no shared file system is needed. Every
// operation has a deadline; a failure says which peer ranks stopped
// answering (found by the PeerProbe) instead of hanging.
// Not thread-safe: one thread issues operations.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective.h"
#include "common/rendezvous.h"

namespace gloo {
class Context;
}

namespace pstrain::worker {

struct GlooOptions {
  int rank = 0;
  int size = 1;
  std::string hostname = "127.0.0.1";  // address this rank listens on
  std::string prefix = "gloo";         // key namespace in the store
  // Connecting the mesh and each collective call (--collective_timeout): a
  // bucket takes milliseconds, so a minute means a rank is gone or stuck.
  absl::Duration timeout = absl::Seconds(60);
  PeerProbe probe;                     // optional: names dead ranks in errors
  // How AllReduce sums (--allreduce_algorithm). kRing: Gloo's ring, 2 (W - 1)
  // dependent steps a phase, each segment a transfer (4 (W - 1) transfers a
  // call each way at least). kBcube: Gloo's bcube (recursive halving and
  // doubling over the factors of W): log2 W steps a phase for a power of
  // two, the same bytes. On slow or busy hosts each transfer costs wake-ups
  // on both sides, so the fewer steps win for the small dense tables of
  // recommendation models.
  enum class Algorithm { kRing, kBcube };
  Algorithm algorithm = Algorithm::kBcube;
};

class GlooCollective final : public Collective {
 public:
  // Connects the full mesh of `size` ranks; every rank calls it.
  static absl::StatusOr<std::unique_ptr<GlooCollective>> Create(const GlooOptions& options,
                                                                RendezvousStore* store);
  ~GlooCollective() override;

  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  const char* name() const override {
    return options_.algorithm == GlooOptions::Algorithm::kRing ? "gloo (ring)" : "gloo (bcube)";
  }
  absl::Status AllReduce(float* data, size_t n, ReduceOp op) override;
  absl::Status Broadcast(float* data, size_t n, int root) override;
  absl::Status Barrier() override;

  // The Gloo context, for benchmarks that call Gloo directly.
  const std::shared_ptr<gloo::Context>& context() const { return context_; }

 private:
  GlooCollective(GlooOptions options, std::shared_ptr<gloo::Context> context)
      : options_(std::move(options)), context_(std::move(context)) {}
  absl::Status Failure(const char* what, const std::exception& e);

  GlooOptions options_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
  bool broken_ = false;
};

}  // namespace pstrain::worker
