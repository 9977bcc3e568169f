// Metrics of one process, rendered in the Prometheus text exposition
// format (version 0.0.4) for a /metrics endpoint.
//
// A Registry holds metric families (a name, a help text, a type and label
// names); a family hands out one cell per label-value combination. Getting
// a cell takes the registry's lock, so callers look cells up once (at
// start-up, or when a table is created) and keep the pointer: updating a
// cell is one relaxed atomic operation, with no lock and no allocation, so
// it may sit on a per-request path. Cells live as long as the registry.
//
// Values that are cheaper to read than to keep current (memory, ages,
// sizes owned by another thread) are set by scrape hooks, which Render()
// runs before writing the text.
//
// Thread-safety: everything may be called from any thread. Render() runs
// the hooks on the calling thread, one scrape at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace pstrain::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// A monotone total (requests, bytes, seconds).
class Counter {
 public:
  void Inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  // For a counter that mirrors a total kept elsewhere (read by a hook).
  void SetTotal(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down (memory, rows, the latest loss).
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Inc(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts of observations per bucket (upper bounds, +Inf implied) and their
// sum. Observe() is a short scan of the bounds and two atomic adds.
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly increasing and finite.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> upper_bounds;  // without +Inf
    std::vector<uint64_t> cumulative;  // one per bound, then +Inf (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<double> sum_{0};
};

// Latency buckets from 50 us to 10 s.
std::vector<double> LatencyBuckets();
// Duration buckets from 0.1 s to 1 h (checkpoints, evaluations).
std::vector<double> LongDurationBuckets();

class Registry;

// The cells of one metric name, one per combination of label values.
template <class Cell>
class Family {
 public:
  // The cell for `label_values` (one per label name, in order), created on
  // first use. REQUIRES: as many values as the family has label names.
  Cell* Get(const std::vector<std::string>& label_values);

 private:
  friend class Registry;
  Family(Registry* registry, size_t index) : registry_(registry), index_(index) {}
  Registry* registry_;
  size_t index_;
};

class Registry {
 public:
  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Registering a name twice returns the same family (same type and label
  // names required: a programmer error otherwise). Names follow
  // Prometheus rules: [a-zA-Z_:][a-zA-Z0-9_:]*; counters end in _total.
  Family<Counter>* AddCounter(const std::string& name, const std::string& help,
                              std::vector<std::string> label_names = {});
  Family<Gauge>* AddGauge(const std::string& name, const std::string& help,
                          std::vector<std::string> label_names = {});
  Family<Histogram>* AddHistogram(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names,
                                  std::vector<double> upper_bounds);

  // Shorthands for a family without labels: its one cell.
  Counter* GetCounter(const std::string& name, const std::string& help) {
    return AddCounter(name, help)->Get({});
  }
  Gauge* GetGauge(const std::string& name, const std::string& help) {
    return AddGauge(name, help)->Get({});
  }

  // Runs `hook` at the start of every Render() (to set gauges from state
  // read at scrape time). Hooks run in the order they were added.
  void AddScrapeHook(std::function<void()> hook);

  // The whole registry in the text exposition format, families in the
  // order they were registered.
  std::string Render();

  // The content type of Render()'s output.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  template <class Cell>
  friend class Family;
  struct FamilyData;

  FamilyData* AddFamily(const std::string& name, const std::string& help, MetricType type,
                        std::vector<std::string> label_names, std::vector<double> bounds);
  template <class Cell>
  Cell* GetCell(size_t index, const std::vector<std::string>& label_values);

  absl::Mutex mu_;
  std::vector<std::unique_ptr<FamilyData>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
  absl::Mutex render_mu_;  // one scrape at a time (hooks need not be reentrant)
};

// Helpers of the text format, exposed for tests and other writers.
// A sample value: integers without exponent, +Inf / -Inf / NaN spelled as
// Prometheus reads them.
std::string FormatValue(double v);
// A label value with \\, \" and \n escaped.
std::string EscapeLabelValue(std::string_view v);

template <class Cell>
Cell* Family<Cell>::Get(const std::vector<std::string>& label_values) {
  return registry_->GetCell<Cell>(index_, label_values);
}

}  // namespace pstrain::metrics
