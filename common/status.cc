#include "common/status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/cord.h"

namespace pstrain {

absl::Status Annotate(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload([&](absl::string_view type, const absl::Cord& payload) {
    annotated.SetPayload(type, payload);
  });
  return annotated;
}

namespace {
constexpr absl::string_view kFatalPayload = "pstrain.dev/fatal";
}  // namespace

absl::Status MarkFatal(absl::Status status) {
  if (!status.ok()) status.SetPayload(kFatalPayload, absl::Cord("1"));
  return status;
}

bool IsFatal(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kFatalPayload).has_value();
}

absl::Status ErrnoToStatus(int err, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EINVAL:
      return absl::InvalidArgumentError(msg);
    case EAGAIN:
    case EHOSTUNREACH:
    case ECONNREFUSED:
    case ECONNRESET:
      return absl::UnavailableError(msg);
    case ENOSPC:
    case ENOMEM:
      return absl::ResourceExhaustedError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace pstrain
