#include "worker/eval/eval_blob.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr uint64_t kErrorCount = ~uint64_t{0};

}  // namespace

Buffer EncodeEvalBlob(const std::vector<float>& probs, const std::vector<float>& labels) {
  uint64_t n = probs.size();
  std::string blob(sizeof(n) + 2 * n * sizeof(float), '\0');
  std::memcpy(blob.data(), &n, sizeof(n));
  std::memcpy(blob.data() + sizeof(n), probs.data(), n * sizeof(float));
  std::memcpy(blob.data() + sizeof(n) + n * sizeof(float), labels.data(), n * sizeof(float));
  return Buffer::FromString(std::move(blob));
}

Buffer EncodeEvalError(absl::string_view message) {
  std::string blob(sizeof(kErrorCount), '\0');
  std::memcpy(blob.data(), &kErrorCount, sizeof(kErrorCount));
  blob.append(message.data(), message.size());
  return Buffer::FromString(std::move(blob));
}

absl::Status AppendEvalBlob(const Buffer& blob, absl::string_view who, std::vector<float>* probs,
                            std::vector<float>* labels) {
  uint64_t m = 0;
  if (blob.size() < sizeof(m)) return absl::DataLossError(absl::StrCat("short evaluation blob of ", who));
  std::memcpy(&m, blob.data(), sizeof(m));
  if (m == kErrorCount) {
    absl::string_view why(reinterpret_cast<const char*>(blob.data()) + sizeof(m), blob.size() - sizeof(m));
    return absl::FailedPreconditionError(absl::StrCat(who, " could not score its part: ", why));
  }
  if (m > blob.size() || blob.size() != sizeof(m) + 2 * m * sizeof(float)) {
    return absl::DataLossError(absl::StrCat("evaluation blob of ", who, " is malformed"));
  }
  const float* f = reinterpret_cast<const float*>(blob.data() + sizeof(m));
  probs->insert(probs->end(), f, f + m);
  labels->insert(labels->end(), f + m, f + 2 * m);
  return absl::OkStatus();
}

}  // namespace pstrain::worker
