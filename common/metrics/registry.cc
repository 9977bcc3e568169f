#include "common/metrics/registry.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

namespace pstrain::metrics {
namespace {

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

const char* TypeName(MetricType t) {
  switch (t) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

std::string EscapeHelp(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// {a="x",b="y"} for the label names and values, plus an optional extra
// label (the histogram's le); "" when there are none.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values,
                      std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    out += EscapeLabelValue(values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
    return buf;
  }
  // The shortest text that reads back as the same double.
  for (int precision = 6; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::string EscapeLabelValue(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// ---- Histogram -----------------------------------------------------------

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      spdlog::critical("histogram bounds must be finite and strictly increasing");
      std::abort();
    }
  }
  counts_.reset(new std::atomic<uint64_t>[bounds_.size() + 1]);
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::Observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.upper_bounds = bounds_;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t total = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    total += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = total;
  }
  s.count = total;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

std::vector<double> LatencyBuckets() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3,
          50e-3, 100e-3, 250e-3, 500e-3, 1,    2.5,    5,      10};
}

std::vector<double> LongDurationBuckets() {
  return {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600};
}

// ---- Registry ------------------------------------------------------------

struct Registry::FamilyData {
  std::string name;
  std::string help;
  MetricType type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;  // histograms
  struct Entry {
    std::vector<std::string> label_values;
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
  };
  std::vector<Entry> entries;
  std::unique_ptr<Family<Counter>> counter_family;
  std::unique_ptr<Family<Gauge>> gauge_family;
  std::unique_ptr<Family<Histogram>> histogram_family;
};

Registry::Registry() = default;
Registry::~Registry() = default;

Registry::FamilyData* Registry::AddFamily(const std::string& name, const std::string& help,
                                          MetricType type, std::vector<std::string> label_names,
                                          std::vector<double> bounds) {
  bool names_ok = ValidName(name, /*allow_colon=*/true);
  for (const std::string& l : label_names) {
    names_ok = names_ok && ValidName(l, false) && l.rfind("__", 0) != 0 && l != "le";
  }
  if (!names_ok) {
    spdlog::critical("invalid metric or label name in {}", name);
    std::abort();
  }
  absl::MutexLock lock(&mu_);
  for (const auto& f : families_) {
    if (f->name != name) continue;
    if (f->type != type || f->label_names != label_names) {
      spdlog::critical("metric {} registered twice with different types or labels", name);
      std::abort();
    }
    return f.get();
  }
  auto f = std::make_unique<FamilyData>();
  f->name = name;
  f->help = help;
  f->type = type;
  f->label_names = std::move(label_names);
  f->bounds = std::move(bounds);
  size_t index = families_.size();
  switch (type) {
    case MetricType::kCounter: f->counter_family.reset(new Family<Counter>(this, index)); break;
    case MetricType::kGauge: f->gauge_family.reset(new Family<Gauge>(this, index)); break;
    case MetricType::kHistogram: f->histogram_family.reset(new Family<Histogram>(this, index)); break;
  }
  families_.push_back(std::move(f));
  return families_.back().get();
}

Family<Counter>* Registry::AddCounter(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names) {
  return AddFamily(name, help, MetricType::kCounter, std::move(label_names), {})
      ->counter_family.get();
}

Family<Gauge>* Registry::AddGauge(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names) {
  return AddFamily(name, help, MetricType::kGauge, std::move(label_names), {})->gauge_family.get();
}

Family<Histogram>* Registry::AddHistogram(const std::string& name, const std::string& help,
                                          std::vector<std::string> label_names,
                                          std::vector<double> upper_bounds) {
  return AddFamily(name, help, MetricType::kHistogram, std::move(label_names),
                   std::move(upper_bounds))
      ->histogram_family.get();
}

template <class Cell>
Cell* Registry::GetCell(size_t index, const std::vector<std::string>& label_values) {
  absl::MutexLock lock(&mu_);
  FamilyData& f = *families_[index];
  if (label_values.size() != f.label_names.size()) {
    spdlog::critical("metric {} takes {} label values, got {}", f.name, f.label_names.size(),
                     label_values.size());
    std::abort();
  }
  for (auto& e : f.entries) {
    if (e.label_values != label_values) continue;
    if constexpr (std::is_same_v<Cell, Counter>) return e.counter.get();
    if constexpr (std::is_same_v<Cell, Gauge>) return e.gauge.get();
    if constexpr (std::is_same_v<Cell, Histogram>) return e.histogram.get();
  }
  FamilyData::Entry e;
  e.label_values = label_values;
  Cell* cell = nullptr;
  if constexpr (std::is_same_v<Cell, Counter>) {
    e.counter = std::make_unique<Counter>();
    cell = e.counter.get();
  } else if constexpr (std::is_same_v<Cell, Gauge>) {
    e.gauge = std::make_unique<Gauge>();
    cell = e.gauge.get();
  } else {
    e.histogram = std::make_unique<Histogram>(f.bounds);
    cell = e.histogram.get();
  }
  f.entries.push_back(std::move(e));
  return cell;
}

template Counter* Registry::GetCell<Counter>(size_t, const std::vector<std::string>&);
template Gauge* Registry::GetCell<Gauge>(size_t, const std::vector<std::string>&);
template Histogram* Registry::GetCell<Histogram>(size_t, const std::vector<std::string>&);

void Registry::AddScrapeHook(std::function<void()> hook) {
  absl::MutexLock lock(&mu_);
  hooks_.push_back(std::move(hook));
}

std::string Registry::Render() {
  absl::MutexLock render_lock(&render_mu_);
  std::vector<std::function<void()>> hooks;
  {
    absl::MutexLock lock(&mu_);
    hooks = hooks_;
  }
  // Hooks may register cells: they run without the registry lock.
  for (auto& h : hooks) h();
  absl::MutexLock lock(&mu_);
  std::string out;
  out.reserve(4096);
  for (const auto& f : families_) {
    out += "# HELP " + f->name + " " + EscapeHelp(f->help) + "\n";
    out += "# TYPE " + f->name + " " + TypeName(f->type) + "\n";
    for (const auto& e : f->entries) {
      if (f->type == MetricType::kHistogram) {
        Histogram::Snapshot s = e.histogram->Read();
        for (size_t i = 0; i <= s.upper_bounds.size(); ++i) {
          std::string le = i < s.upper_bounds.size() ? FormatValue(s.upper_bounds[i]) : "+Inf";
          out += f->name + "_bucket" + LabelText(f->label_names, e.label_values, "le", le) + " " +
                 FormatValue(static_cast<double>(s.cumulative[i])) + "\n";
        }
        std::string labels = LabelText(f->label_names, e.label_values);
        out += f->name + "_sum" + labels + " " + FormatValue(s.sum) + "\n";
        out += f->name + "_count" + labels + " " + FormatValue(static_cast<double>(s.count)) + "\n";
      } else {
        double v = f->type == MetricType::kCounter ? e.counter->value() : e.gauge->value();
        out += f->name + LabelText(f->label_names, e.label_values) + " " + FormatValue(v) + "\n";
      }
    }
  }
  return out;
}

}  // namespace pstrain::metrics
