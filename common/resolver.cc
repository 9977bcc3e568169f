#include "common/resolver.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace pstrain {

bool IsNumericHost(absl::string_view host) {
  if (absl::ConsumePrefix(&host, "[")) {
    if (!absl::ConsumeSuffix(&host, "]")) return false;
  }
  if (host.empty()) return false;
  std::string h(host.substr(0, host.find('%')));  // an IPv6 scope: fe80::1%eth0
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

absl::StatusOr<std::string> SystemLookup(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &list);
  if (rc != 0) {
    std::string why = rc == EAI_SYSTEM ? std::strerror(errno) : gai_strerror(rc);
    std::string what = absl::StrCat("cannot resolve ", host, ": ", why);
    if (rc == EAI_NONAME || rc == EAI_NODATA) return absl::NotFoundError(what);
    return absl::UnavailableError(what);
  }
  const addrinfo* pick = nullptr;
  for (const addrinfo* a = list; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
    if (a->ai_family == AF_INET6 && pick == nullptr) pick = a;
  }
  char text[INET6_ADDRSTRLEN] = {0};
  bool ok = false;
  if (pick != nullptr && pick->ai_family == AF_INET) {
    ok = inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(pick->ai_addr)->sin_addr, text,
                   sizeof(text)) != nullptr;
  } else if (pick != nullptr) {
    ok = inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(pick->ai_addr)->sin6_addr,
                   text, sizeof(text)) != nullptr;
  }
  freeaddrinfo(list);
  if (!ok) return absl::NotFoundError(absl::StrCat("cannot resolve ", host, ": no IP address"));
  return std::string(text);
}

HostLookup HostsFileLookup(std::string path, HostLookup fallback) {
  return [path = std::move(path),
          fallback = std::move(fallback)](const std::string& host) -> absl::StatusOr<std::string> {
    std::ifstream in(path);
    std::string line;
    while (in && std::getline(in, line)) {
      std::vector<absl::string_view> parts =
          absl::StrSplit(absl::string_view(line).substr(0, line.find('#')),
                         absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
      if (parts.size() < 2 || parts[0] != host) continue;
      if (parts[1] == "hang") {
        while (true) absl::SleepFor(absl::Hours(1));  // as a DNS server that never answers
      }
      if (parts[1] == "fail") {
        return absl::NotFoundError(absl::StrCat("cannot resolve ", host, ": listed as fail in ", path));
      }
      if (!IsNumericHost(parts[1])) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": ", host, " maps to ", parts[1], ", not an IP address"));
      }
      return std::string(parts[1]);
    }
    return fallback ? fallback(host) : SystemLookup(host);
  };
}

namespace {

struct Job {
  std::string host;
  absl::Time queued;
  bool done = false;
  std::vector<uint64_t> waiters;
};

struct Waiter {
  Resolver::Callback done;
  std::string host;
};

}  // namespace

// Shared by the Resolver and its lookup threads: a thread stuck in a lookup
// outlives the Resolver and finds the state still there when it returns.
struct Resolver::State : std::enable_shared_from_this<Resolver::State> {
  explicit State(ResolverOptions o) : options(std::move(o)) {
    if (!options.lookup) options.lookup = SystemLookup;
    if (!options.hosts_file.empty()) {
      options.lookup = HostsFileLookup(options.hosts_file, std::move(options.lookup));
    }
  }

  void Resolve(const std::string& host, Callback done);
  // A lookup thread: takes queued jobs until stopping.
  void LookupLoop();
  // Fails the waiters whose deadline passed, until stopping.
  void TimerLoop();
  // REQUIRES: mu held. The waiters of `job`, which is done with `result`.
  std::vector<Callback> Finish(Job& job, const absl::StatusOr<std::string>& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  ResolverOptions options;
  absl::Mutex mu;
  absl::CondVar work_cv;   // a job queued, or stopping
  absl::CondVar timer_cv;  // a new deadline, or stopping
  bool stopping ABSL_GUARDED_BY(mu) = false;
  std::deque<std::shared_ptr<Job>> queue ABSL_GUARDED_BY(mu);
  // The newest job of each name not yet done, and how many of its jobs
  // are not done (running or stuck).
  absl::flat_hash_map<std::string, std::shared_ptr<Job>> latest ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, int> unfinished ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::pair<std::string, absl::Time>> cache ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint64_t, Waiter> waiters ABSL_GUARDED_BY(mu);
  using Deadline = std::pair<absl::Time, uint64_t>;
  std::priority_queue<Deadline, std::vector<Deadline>, std::greater<Deadline>> deadlines
      ABSL_GUARDED_BY(mu);
  uint64_t next_waiter ABSL_GUARDED_BY(mu) = 1;
  int threads ABSL_GUARDED_BY(mu) = 0;  // lookup threads
  int idle ABSL_GUARDED_BY(mu) = 0;     // of them, waiting for a job
  std::thread timer;
};

void Resolver::State::Resolve(const std::string& host, Callback done) {
  const absl::Time now = absl::Now();
  mu.Lock();
  if (auto c = cache.find(host); c != cache.end() && now - c->second.second < options.cache_ttl) {
    std::string address = c->second.first;
    mu.Unlock();
    done(std::move(address));
    return;
  }
  std::shared_ptr<Job> job;
  auto l = latest.find(host);
  if (l != latest.end() && now - l->second->queued < options.timeout) {
    job = l->second;  // join the lookup in flight
  } else {
    auto u = unfinished.find(host);
    const int stuck = u == unfinished.end() ? 0 : u->second;
    // Past max_stuck_per_name, one more try every stuck_retry: a name that
    // hangs for long costs a thread per stuck_retry, and is still resolved
    // soon after it answers again.
    const bool too_stuck = stuck >= options.max_stuck_per_name && l != latest.end() &&
                           now - l->second->queued < options.stuck_retry;
    const bool no_thread = idle <= static_cast<int>(queue.size()) && threads >= options.max_threads;
    if (too_stuck || no_thread) {
      mu.Unlock();
      done(absl::UnavailableError(
          no_thread ? absl::StrCat("cannot resolve ", host, ": all ", options.max_threads,
                                   " resolver threads are stuck in lookups")
                    : absl::StrCat("cannot resolve ", host, ": ", stuck,
                                   " lookups of it have not returned")));
      return;
    }
    job = std::make_shared<Job>();
    job->host = host;
    job->queued = now;
    latest[host] = job;
    ++unfinished[host];
    queue.push_back(job);
    if (idle < static_cast<int>(queue.size())) {
      ++threads;
      ++idle;
      std::thread([self = shared_from_this()] { self->LookupLoop(); }).detach();
    }
    work_cv.Signal();
  }
  const uint64_t id = next_waiter++;
  waiters.emplace(id, Waiter{std::move(done), host});
  job->waiters.push_back(id);
  deadlines.push({now + options.timeout, id});
  timer_cv.Signal();
  mu.Unlock();
}

std::vector<Resolver::Callback> Resolver::State::Finish(Job& job,
                                                        const absl::StatusOr<std::string>& result) {
  job.done = true;
  if (--unfinished[job.host] <= 0) unfinished.erase(job.host);
  if (auto l = latest.find(job.host); l != latest.end() && l->second.get() == &job) latest.erase(l);
  if (result.ok()) cache[job.host] = {*result, absl::Now()};
  std::vector<Callback> out;
  for (uint64_t id : job.waiters) {
    auto w = waiters.find(id);
    if (w == waiters.end()) continue;  // timed out already
    out.push_back(std::move(w->second.done));
    waiters.erase(w);
  }
  return out;
}

void Resolver::State::LookupLoop() {
  mu.Lock();
  while (true) {
    while (!stopping && queue.empty()) work_cv.Wait(&mu);
    if (stopping) break;
    std::shared_ptr<Job> job = std::move(queue.front());
    queue.pop_front();
    --idle;
    mu.Unlock();
    absl::StatusOr<std::string> result = options.lookup(job->host);
    mu.Lock();
    std::vector<Callback> callbacks = Finish(*job, result);
    ++idle;
    mu.Unlock();
    for (Callback& cb : callbacks) cb(result);
    callbacks.clear();
    mu.Lock();
  }
  --threads;
  --idle;
  mu.Unlock();
}

void Resolver::State::TimerLoop() {
  mu.Lock();
  while (!stopping) {
    std::vector<std::pair<Callback, std::string>> expired;
    const absl::Time now = absl::Now();
    while (!deadlines.empty() && deadlines.top().first <= now) {
      auto w = waiters.find(deadlines.top().second);
      deadlines.pop();
      if (w == waiters.end()) continue;  // answered already
      expired.emplace_back(std::move(w->second.done), std::move(w->second.host));
      waiters.erase(w);
    }
    if (!expired.empty()) {
      mu.Unlock();
      for (auto& [cb, host] : expired) {
        cb(absl::DeadlineExceededError(absl::StrCat("lookup of ", host, " took longer than ",
                                                    absl::FormatDuration(options.timeout))));
      }
      expired.clear();
      mu.Lock();
      continue;
    }
    if (deadlines.empty()) {
      timer_cv.Wait(&mu);
    } else {
      timer_cv.WaitWithDeadline(&mu, deadlines.top().first);
    }
  }
  mu.Unlock();
}

Resolver::Resolver(ResolverOptions options)
    : state_(std::make_shared<State>(std::move(options))) {
  state_->timer = std::thread([s = state_.get()] { s->TimerLoop(); });
}

Resolver::~Resolver() {
  absl::flat_hash_map<uint64_t, Waiter> dropped;
  {
    absl::MutexLock lock(&state_->mu);
    state_->stopping = true;
    dropped.swap(state_->waiters);
    state_->work_cv.SignalAll();
    state_->timer_cv.SignalAll();
  }
  state_->timer.join();
  // Lookup threads end when they next look for work; one stuck in a lookup
  // keeps the state alive until it returns.
}

void Resolver::Resolve(const std::string& host, Callback done) {
  if (IsNumericHost(host)) {
    absl::string_view address = host;
    if (absl::ConsumePrefix(&address, "[")) absl::ConsumeSuffix(&address, "]");
    done(std::string(address));
    return;
  }
  if (host.empty()) {
    done(absl::InvalidArgumentError("cannot resolve an empty host name"));
    return;
  }
  state_->Resolve(host, std::move(done));
}

namespace {
absl::Mutex g_default_mu;
ResolverOptions* g_default_options ABSL_GUARDED_BY(g_default_mu) = nullptr;
}  // namespace

void Resolver::SetDefaultOptions(ResolverOptions options) {
  absl::MutexLock lock(&g_default_mu);
  delete g_default_options;
  g_default_options = new ResolverOptions(std::move(options));
}

std::shared_ptr<Resolver> Resolver::Default() {
  // Never destroyed: transports of static objects may use it at exit.
  static auto* resolver = [] {
    absl::MutexLock lock(&g_default_mu);
    return new std::shared_ptr<Resolver>(std::make_shared<Resolver>(
        g_default_options != nullptr ? *g_default_options : ResolverOptions()));
  }();
  return *resolver;
}

}  // namespace pstrain
