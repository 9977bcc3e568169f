#include "common/rendezvous.h"

#include "absl/strings/str_cat.h"

namespace pstrain {

absl::Status InMemoryRendezvousStore::Set(const std::string& key, const std::string& value) {
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryRendezvousStore::Get(const std::string& key,
                                                        absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto present = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return values_.count(key) > 0;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat("rendezvous key ", key, " not set in time"));
  }
  return values_[key];
}

}  // namespace pstrain
