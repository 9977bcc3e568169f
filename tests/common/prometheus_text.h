// A small, strict parser of the Prometheus text exposition format (0.0.4)
// for tests: HELP/TYPE lines, metric and label names, escaped label values,
// sample values; then the rules a scraper relies on: one TYPE per family
// before its samples, families not interleaved, counters not negative,
// histogram buckets sorted by le, cumulative counts monotone, a +Inf bucket
// equal to _count, and _sum/_count present.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace pstrain::testing {

struct PromSample {
  std::string name;  // as written, e.g. foo_bucket
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct PromFamily {
  std::string name;
  std::string help;
  std::string type = "untyped";
  std::vector<PromSample> samples;
};

struct PromText {
  std::map<std::string, PromFamily> families;
  std::string error;  // empty when the text is valid

  const PromFamily* Find(const std::string& name) const {
    auto it = families.find(name);
    return it == families.end() ? nullptr : &it->second;
  }
  // The value of the sample `name` with exactly `labels`, or NaN.
  double Value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    for (const auto& [fname, f] : families) {
      for (const PromSample& s : f.samples) {
        if (s.name == name && s.labels == labels) return s.value;
      }
    }
    return NAN;
  }
};

namespace prom_internal {

inline bool NameChar(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
         (!first && c >= '0' && c <= '9');
}

inline bool ParseValue(const std::string& text, double* v) {
  if (text == "+Inf" || text == "Inf") {
    *v = INFINITY;
    return true;
  }
  if (text == "-Inf") {
    *v = -INFINITY;
    return true;
  }
  if (text == "NaN") {
    *v = NAN;
    return true;
  }
  if (text.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0' && text.find_first_of("nN") == std::string::npos;
}

// The family a sample name belongs to (histogram suffixes stripped when
// the stripped name was declared a histogram).
inline std::string FamilyOf(const std::string& sample, const std::map<std::string, PromFamily>& fams) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      std::string base = sample.substr(0, sample.size() - s.size());
      auto it = fams.find(base);
      if (it != fams.end() && it->second.type == "histogram") return base;
    }
  }
  return sample;
}

}  // namespace prom_internal

inline PromText ParsePrometheusText(const std::string& text) {
  using namespace prom_internal;
  PromText out;
  std::set<std::string> finished;  // families whose samples are behind us
  std::string current;             // family of the previous sample
  auto fail = [&](int line_no, const std::string& why) {
    if (out.error.empty()) out.error = "line " + std::to_string(line_no) + ": " + why;
  };
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size() && out.error.empty()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) {
      fail(line_no + 1, "the text must end with a newline");
      break;
    }
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::string kind = line.substr(0, 7);
      if (kind != "# HELP " && kind != "# TYPE ") continue;  // a comment
      size_t sp = line.find(' ', 7);
      std::string name = line.substr(7, sp == std::string::npos ? std::string::npos : sp - 7);
      std::string rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      for (size_t i = 0; i < name.size(); ++i) {
        if (!NameChar(name[i], i == 0, true)) fail(line_no, "bad metric name '" + name + "'");
      }
      if (name.empty()) fail(line_no, "missing metric name");
      if (finished.count(name) || current == name) fail(line_no, "HELP/TYPE after samples of " + name);
      PromFamily& f = out.families[name];
      f.name = name;
      if (kind == "# HELP ") {
        if (!f.help.empty()) fail(line_no, "second HELP for " + name);
        f.help = rest;
      } else {
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) fail(line_no, "unknown type '" + rest + "'");
        if (f.type != "untyped" && !f.samples.empty()) fail(line_no, "TYPE after samples");
        f.type = rest;
      }
      continue;
    }
    // A sample: name{labels} value [timestamp]
    size_t i = 0;
    while (i < line.size() && NameChar(line[i], i == 0, true)) ++i;
    std::string name = line.substr(0, i);
    if (name.empty()) {
      fail(line_no, "bad sample line '" + line + "'");
      break;
    }
    PromSample s;
    s.name = name;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        size_t start = i;
        while (i < line.size() && NameChar(line[i], i == start, false)) ++i;
        std::string lname = line.substr(start, i - start);
        if (lname.empty() || i + 1 >= line.size() || line[i] != '=' || line[i + 1] != '"') {
          fail(line_no, "bad label in '" + line + "'");
          break;
        }
        i += 2;
        std::string value;
        bool closed = false;
        while (i < line.size()) {
          char c = line[i++];
          if (c == '"') {
            closed = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size()) break;
            char e = line[i++];
            if (e == 'n') {
              value += '\n';
            } else if (e == '\\' || e == '"') {
              value += e;
            } else {
              fail(line_no, "bad escape in label value");
            }
          } else {
            value += c;
          }
        }
        if (!closed) fail(line_no, "unterminated label value");
        if (s.labels.count(lname)) fail(line_no, "repeated label " + lname);
        s.labels[lname] = value;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size() || line[i] != '}') {
        fail(line_no, "unterminated label set");
        break;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      fail(line_no, "missing value in '" + line + "'");
      break;
    }
    std::string rest = line.substr(i + 1);
    std::string value_text = rest.substr(0, rest.find(' '));
    if (!ParseValue(value_text, &s.value)) fail(line_no, "bad value '" + value_text + "'");
    std::string family = FamilyOf(name, out.families);
    if (family != current) {
      if (finished.count(family)) fail(line_no, "samples of " + family + " are interleaved");
      if (!current.empty()) finished.insert(current);
      current = family;
    }
    PromFamily& f = out.families[family];
    f.name = family;
    if (f.type == "counter" && !(s.value >= 0)) fail(line_no, "negative or NaN counter " + name);
    if (f.type == "histogram" && name == family) fail(line_no, "bare sample in histogram " + family);
    f.samples.push_back(std::move(s));
  }
  // Histogram rules, per label set (without le).
  for (const auto& [name, f] : out.families) {
    if (f.type != "histogram" || !out.error.empty()) continue;
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const PromSample& s : f.samples) {
      auto labels = s.labels;
      if (s.name == name + "_bucket") {
        auto le = labels.find("le");
        if (le == labels.end()) {
          out.error = name + ": bucket without le";
          break;
        }
        double bound = 0;
        if (!ParseValue(le->second, &bound)) out.error = name + ": bad le '" + le->second + "'";
        labels.erase(le);
        buckets[labels].push_back({bound, s.value});
      } else if (s.name == name + "_count") {
        counts[labels] = s.value;
      } else if (s.name == name + "_sum") {
        sums[labels] = s.value;
      }
    }
    for (const auto& [labels, b] : buckets) {
      for (size_t k = 1; k < b.size(); ++k) {
        if (!(b[k].first > b[k - 1].first)) out.error = name + ": buckets not sorted by le";
        if (b[k].second < b[k - 1].second) out.error = name + ": bucket counts decrease";
      }
      if (b.empty() || !std::isinf(b.back().first)) {
        out.error = name + ": no +Inf bucket";
      } else if (!counts.count(labels) || counts.at(labels) != b.back().second) {
        out.error = name + ": +Inf bucket differs from _count";
      }
      if (!sums.count(labels)) out.error = name + ": no _sum";
    }
  }
  return out;
}

}  // namespace pstrain::testing
