#include "cluster/node_info.h"

#include <unistd.h>

#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pstrain {

std::string LocalHostName() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

uint64_t ProcessIncarnation() {
  static const uint64_t value = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd() ^ static_cast<uint64_t>(getpid());
  }();
  return value;
}

std::string AdvertisedEndpoint(const std::string& bound, const std::string& host) {
  const std::string any = "tcp://0.0.0.0:";
  if (!absl::StartsWith(bound, any)) return bound;
  return absl::StrCat("tcp://", host.empty() ? LocalHostName() : host, ":",
                      bound.substr(any.size()));
}

std::string HostOf(const std::string& endpoint) {
  const std::string tcp = "tcp://";
  if (!absl::StartsWith(endpoint, tcp)) return "127.0.0.1";
  std::string host = endpoint.substr(tcp.size());
  if (absl::StartsWith(host, "[")) {  // IPv6: tcp://[::1]:7000
    const size_t close = host.find(']');
    if (close != std::string::npos) return host.substr(1, close - 1);
  }
  if (size_t p = host.rfind(':'); p != std::string::npos) host = host.substr(0, p);
  return host;
}

}  // namespace pstrain
