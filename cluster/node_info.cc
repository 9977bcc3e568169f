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

}  // namespace pstrain
