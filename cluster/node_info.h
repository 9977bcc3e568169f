// Facts about this process that identify it to the cluster.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

// The host name (gethostname), or "localhost".
std::string LocalHostName();
// A random 64-bit number drawn once per process: tells a restarted process
// from the one it replaces.
uint64_t ProcessIncarnation();
// "tcp://0.0.0.0:7000" advertised as "tcp://HOST:7000" (HOST = `host`, or
// this machine's name when empty); other endpoints unchanged.
std::string AdvertisedEndpoint(const std::string& bound, const std::string& host);

}  // namespace pstrain
