// The job a coordinator hands out: a node started with only --coordinator
// (a compose service, a Kubernetes pod) asks for it before it reads its own
// settings.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security/curve_keys.h"

namespace pstrain {

// The key the coordinator keeps the job under in its store.
inline constexpr const char* kJobSpecKey = "job/spec";

// Asks the coordinator at `endpoint` for its job (a job file's text),
// retrying for up to `connect_timeout` while it does not answer. nullopt
// when the coordinator has no job (it was started with flags only);
// Unavailable naming the endpoint when it never answered.
absl::StatusOr<std::optional<std::string>> FetchJobSpec(const std::string& endpoint,
                                                        const CurveKeys& curve,
                                                        absl::Duration connect_timeout);

}  // namespace pstrain
