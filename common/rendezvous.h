// RendezvousStore: a tiny key-value store that ranks of a collective use to
// find each other (Gloo's pair addresses, NCCL's unique id). set/get with a
// deadline; values are write-once per key in practice. The job's store is
// the coordinator (cluster/coordinator_store.h); InMemoryRendezvousStore
// serves tests that run ranks as threads. Implementations are thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pstrain {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // Waits up to `timeout` for `key`; DeadlineExceeded when it never comes.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;
};

class InMemoryRendezvousStore final : public RendezvousStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;

 private:
  absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pstrain
