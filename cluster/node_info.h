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
// The host of a TCP endpoint, where a node's other listeners (a Gloo group)
// can be reached: "tcp://10.0.0.5:7000" -> "10.0.0.5", "tcp://[::1]:7000" ->
// "::1" (no brackets: an address for getaddrinfo). Loopback ("127.0.0.1")
// for an endpoint of another transport (in-process names, ipc://): its
// peers live on this machine.
std::string HostOf(const std::string& endpoint);

}  // namespace pstrain
