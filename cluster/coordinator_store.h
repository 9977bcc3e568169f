// The job's RendezvousStore: keys live in the coordinator's store, so ranks
// of a collective find each other without a shared file system. Keys are
// put under `prefix/` so several groups can share the coordinator.
// Thread-safe (the CoordinatorClient is).
#pragma once

#include <string>

#include "cluster/coordinator_client.h"
#include "common/rendezvous.h"

namespace pstrain {

class CoordinatorStore final : public RendezvousStore {
 public:
  CoordinatorStore(CoordinatorClient* client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return client_->StoreSet(prefix_ + "/" + key, Buffer::FromString(std::string(value)));
  }
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override {
    PS_ASSIGN_OR_RETURN(Buffer b, client_->StoreGet(prefix_ + "/" + key, timeout));
    return std::string(b.view());
  }

 private:
  CoordinatorClient* client_;
  std::string prefix_;
};

}  // namespace pstrain
