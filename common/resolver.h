// Resolver: host names to numeric addresses, off the caller's thread and
// within a bounded time.
//
// libzmq resolves the host of a tcp:// endpoint in its context's one I/O
// thread, on every reconnect too; when a name hangs (a stopped container
// leaving Docker's DNS, a Kubernetes pod gone) every socket of the process
// stalls with it, heartbeats included. ZmqTransport therefore connects by
// address only, and asks this class for the address.
//
// A lookup runs on one of the resolver's threads and its answer comes back
// through a callback, within `timeout` (DeadlineExceeded past it). A lookup
// cannot be cancelled (getaddrinfo cannot), so one that hangs keeps its
// thread: the next lookups of other names get other threads (a new one when
// all are busy, up to `max_threads`), lookups of the same name join the one
// in flight while it is younger than `timeout`, and a name with
// `max_stuck_per_name` lookups still hanging fails fast (but for one more
// try every `stuck_retry`). Answers are cached for `cache_ttl`.
//
// Thread-safety: thread-safe. Callbacks run on a resolver thread, or on the
// calling thread for a numeric host or a cached answer; they must not block.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pstrain {

// A blocking lookup of one host name: its numeric address ("10.0.0.5",
// "::1", no brackets) or an error. May block for a long time, or forever.
using HostLookup = std::function<absl::StatusOr<std::string>(const std::string& host)>;

// getaddrinfo: the first IPv4 address of `host`, else its first IPv6 one.
// NotFound when the name does not exist, Unavailable for other failures.
absl::StatusOr<std::string> SystemLookup(const std::string& host);

// A test hook (PSTRAIN_TEST_HOSTS_FILE, see common/process.h): answers the
// names listed in the file at `path`, re-read on every lookup, one
// "NAME ADDRESS" per line ('#' starts a comment). ADDRESS "hang": the
// lookup never returns (as a DNS server that stopped answering); "fail":
// NotFound at once (as a name that left the DNS). Names not listed, or no
// readable file, go to `fallback`.
HostLookup HostsFileLookup(std::string path, HostLookup fallback);

// True for an IP literal ("10.0.0.5", "::1", "fe80::1%eth0"): nothing to
// look up.
bool IsNumericHost(absl::string_view host);

struct ResolverOptions {
  HostLookup lookup;  // null: SystemLookup
  // Not empty: HostsFileLookup(hosts_file, lookup) (a test hook).
  std::string hosts_file;
  absl::Duration timeout = absl::Seconds(2);
  absl::Duration cache_ttl = absl::Milliseconds(500);
  int max_threads = 32;
  int max_stuck_per_name = 4;
  absl::Duration stuck_retry = absl::Seconds(10);
};

class Resolver {
 public:
  using Callback = absl::AnyInvocable<void(absl::StatusOr<std::string> address)>;

  explicit Resolver(ResolverOptions options = {});
  // Does not wait for lookups that hang; callbacks not yet run are dropped.
  ~Resolver();
  Resolver(const Resolver&) = delete;
  Resolver& operator=(const Resolver&) = delete;

  // Calls `done` exactly once with the address of `host` or an error:
  // DeadlineExceeded past the timeout, Unavailable when the name's lookups
  // hang or no thread is left, the lookup's own error otherwise.
  void Resolve(const std::string& host, Callback done);

  // The process's resolver (never destroyed). Its options come from
  // SetDefaultOptions when that ran before the first call.
  static std::shared_ptr<Resolver> Default();
  static void SetDefaultOptions(ResolverOptions options);

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace pstrain
