// Status helpers shared by every layer: propagation macros (our Abseil has
// none), annotation with context, and conversions from library exceptions.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

// Returns `status` with `context` prepended to its message ("context: msg").
// OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

// Marks an error as fatal for the process that meets it (a server's disk
// tier that cannot be written): the server stops instead of answering the
// next request. OK stays OK; Annotate keeps the mark.
absl::Status MarkFatal(absl::Status status);
bool IsFatal(const absl::Status& status);

// An errno value turned into the closest StatusCode, with `what` as context.
absl::Status ErrnoToStatus(int err, absl::string_view what);

}  // namespace pstrain

#define PS_STATUS_CONCAT_INNER_(a, b) a##b
#define PS_STATUS_CONCAT_(a, b) PS_STATUS_CONCAT_INNER_(a, b)

// Returns from the current function when `expr` yields a non-OK status.
#define PS_RETURN_IF_ERROR(expr)                       \
  do {                                                 \
    ::absl::Status ps_status_ = (expr);                \
    if (!ps_status_.ok()) return ps_status_;           \
  } while (0)

// `lhs` = value of the StatusOr `rexpr`, or returns its error.
#define PS_ASSIGN_OR_RETURN(lhs, rexpr) \
  PS_ASSIGN_OR_RETURN_IMPL_(PS_STATUS_CONCAT_(ps_statusor_, __LINE__), lhs, rexpr)
#define PS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                              \
  if (!tmp.ok()) return std::move(tmp).status();   \
  lhs = std::move(tmp).value()
