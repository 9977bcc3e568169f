// Check macros for ZeroMQ (cppzmq throws zmq::error_t): each turns an
// exception into a Status carrying file:line, the call's text and ZeroMQ's
// error string, so no exception leaves a function we own.
#pragma once

#include <zmq.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::internal {

inline absl::Status ZmqError(const zmq::error_t& e, const char* call, const char* file, int line) {
  absl::Status base = ErrnoToStatus(e.num(), call);
  return absl::Status(base.code(), absl::StrCat(file, ":", line, ": ", call, ": ", e.what()));
}

}  // namespace pstrain::internal

// Evaluates `call`; on zmq::error_t returns the error as a Status.
#define PS_ZMQ_CHECK(call)                                                      \
  do {                                                                          \
    try {                                                                       \
      call;                                                                     \
    } catch (const zmq::error_t& ps_zmq_e_) {                                   \
      return ::pstrain::internal::ZmqError(ps_zmq_e_, #call, __FILE__, __LINE__); \
    }                                                                           \
  } while (0)
