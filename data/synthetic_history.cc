#include "data/synthetic_history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/hash.h"
#include "common/status.h"
#include "data/eval/metrics.h"

namespace pstrain::worker {
namespace {

// A row's own random stream: rows are independent of how many are written.
struct Rng {
  uint64_t state;
  uint64_t Next() {
    state += 0x9e3779b97f4a7c15ULL;
    return Mix64(state);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  int Below(int n) { return static_cast<int>(Next() % static_cast<uint64_t>(n)); }
  // A skewed draw in [0, n): small values are popular.
  int Skewed(int n) { return std::min(n - 1, static_cast<int>(n * std::pow(Uniform(), 2.5))); }
};

// A weight in about [-1, 1] of (seed, part, value).
double Weight(uint64_t seed, uint64_t part, uint64_t value) {
  return static_cast<double>(Mix64(seed ^ Mix64(part * 0x1000193ULL ^ value)) >> 11) * 0x1.0p-52 - 1.0;
}

struct Row {
  int user = 0;
  int item = 0;
  std::vector<int> history;
  int age = 0;
  int price = 0;
  double logit = 0;  // without the bias
  double conversion_logit = 0;  // without its bias
};

class World {
 public:
  explicit World(const HistoryWorldOptions& o) : o_(o) {}

  int TopicOf(int item) const { return item % o_.topics; }
  int ItemOfTopic(int topic, Rng& rng) const {
    return topic + o_.topics * rng.Skewed(o_.items_per_topic);
  }
  int RandomItem(Rng& rng) const { return ItemOfTopic(rng.Below(o_.topics), rng); }

  void Sample(int64_t r, Row* row) const {
    Rng rng{Mix64(o_.seed ^ Mix64(static_cast<uint64_t>(r) + 1))};
    row->user = rng.Skewed(o_.users);
    const int favourite[2] = {static_cast<int>(Mix64(o_.seed ^ (row->user * 2 + 1)) % o_.topics),
                              static_cast<int>(Mix64(o_.seed ^ (row->user * 2 + 2)) % o_.topics)};
    const int length = 1 + rng.Below(o_.max_history);
    row->history.clear();
    for (int k = 0; k < length; ++k) {
      row->history.push_back(rng.Uniform() < 0.6 ? ItemOfTopic(favourite[rng.Below(2)], rng)
                                                 : RandomItem(rng));
    }
    row->item = rng.Uniform() < 0.5 ? ItemOfTopic(favourite[rng.Below(2)], rng) : RandomItem(rng);
    row->age = 18 + static_cast<int>(Mix64(o_.seed ^ 0xa9e ^ row->user) % 60);
    row->price = 1 + static_cast<int>(Mix64(o_.seed ^ 0x9c1 ^ row->item) % 500);
    // Relevance: the candidate's topic (or a neighbour) among the last 10 items.
    const int topic = TopicOf(row->item);
    double relevance = 0;
    const int from = std::max(0, length - 10);
    for (int k = from; k < length; ++k) {
      const int t = TopicOf(row->history[k]);
      if (t == topic) relevance = 1.0;
      if (relevance < 0.4 && (t == (topic + 1) % o_.topics || (t + 1) % o_.topics == topic)) {
        relevance = 0.4;
      }
    }
    row->logit = 0.6 * Weight(o_.seed, 1, row->item) + 0.3 * Weight(o_.seed, 2, row->user) +
                 0.4 * std::tanh((row->age - 45) / 15.0) + o_.strength * relevance;
    row->conversion_logit = 1.5 * relevance + 0.5 * Weight(o_.seed, 1, row->item) +
                            0.8 * Weight(o_.seed, 3, row->user) -
                            0.6 * std::log(row->price) / std::log(500.0);
  }

 private:
  const HistoryWorldOptions& o_;
};

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

absl::StatusOr<HistoryWorldReport> WriteHistoryWorld(const HistoryWorldOptions& o,
                                                     const std::string& path,
                                                     const std::string& schema_path) {
  if (o.rows < 1 || o.max_history < 1 || o.topics < 3 || o.items_per_topic < 1 || o.users < 1 ||
      o.tasks < 1 || o.tasks > 2) {
    return absl::InvalidArgumentError("history world: rows, max_history, topics (>= 3), "
                                      "items_per_topic and users must be positive, tasks 1 or 2");
  }
  World world(o);
  // The biases for the target click and conversion rates, from a pilot far
  // from any real row.
  std::vector<double> pilot, conversion_pilot;
  Row row;
  for (int i = 0; i < 20000; ++i) {
    world.Sample((int64_t{1} << 62) + i, &row);
    pilot.push_back(row.logit);
    conversion_pilot.push_back(row.conversion_logit);
  }
  const auto bias_for = [](const std::vector<double>& logits, double target) {
    double lo = -20, hi = 20;
    for (int it = 0; it < 60; ++it) {
      const double mid = (lo + hi) / 2;
      double rate = 0;
      for (double l : logits) rate += Sigmoid(l + mid);
      (rate / logits.size() < target ? lo : hi) = mid;
    }
    return (lo + hi) / 2;
  };
  const double bias = bias_for(pilot, o.positive_rate);
  const double conversion_bias = bias_for(conversion_pilot, o.conversion_rate);
  const bool conversions = o.tasks == 2;
  std::string text = absl::StrCat("clicked,", conversions ? "converted," : "",
                                  "age,price,user,item,category,history,history_category\n");
  std::vector<double> probs, conversion_probs;
  std::vector<float> labels, conversion_labels;
  probs.reserve(o.rows);
  labels.reserve(o.rows);
  for (int64_t r = o.first_row; r < o.first_row + o.rows; ++r) {
    world.Sample(r, &row);
    const double p = Sigmoid(row.logit + bias);
    Rng label_rng{Mix64(o.seed ^ 0x1abe1ULL ^ Mix64(static_cast<uint64_t>(r)))};
    const int clicked = label_rng.Uniform() < p ? 1 : 0;
    probs.push_back(p);
    labels.push_back(static_cast<float>(clicked));
    absl::StrAppend(&text, clicked, ",");
    if (conversions) {
      if (clicked == 1) {
        const double q = Sigmoid(row.conversion_logit + conversion_bias);
        const int converted = label_rng.Uniform() < q ? 1 : 0;
        conversion_probs.push_back(q);
        conversion_labels.push_back(static_cast<float>(converted));
        absl::StrAppend(&text, converted);
      }
      text += ',';  // empty: no conversion observed without a click
    }
    absl::StrAppend(&text, row.age, ",", row.price, ",u", row.user, ",i", row.item,
                    ",c", world.TopicOf(row.item), ",");
    for (size_t k = 0; k < row.history.size(); ++k) {
      absl::StrAppend(&text, k > 0 ? "|" : "", "i", row.history[k]);
    }
    text += ',';
    for (size_t k = 0; k < row.history.size(); ++k) {
      absl::StrAppend(&text, k > 0 ? "|" : "", "c", world.TopicOf(row.history[k]));
    }
    text += '\n';
  }
  PS_RETURN_IF_ERROR(WriteFileAtomically(path, text));
  const std::string schema = absl::StrCat(
      "{\n"
      "  // pstrain gen --history: the history lists items, hashed as the item column's\n"
      "  // (one embedding row per item wherever it appears), the last ", o.max_history, " kept.\n"
      "  \"format\": \"csv\", \"header\": true, \"label\": \"clicked\", \"hash_buckets\": 1000000,\n",
      conversions ? "  // converted: after a click only (empty otherwise: masked out of its head)\n"
                    "  \"labels\": {\"converted\": \"converted\"},\n"
                  : "",
      "  \"dense\": [\"age\", \"price\"], \"dense_transform\": \"log1p\",\n"
      "  \"sparse\": [\"user\", \"item\", \"category\",\n"
      "             {\"column\": \"history\", \"multi_hot\": \"|\", \"ids_like\": \"item\", "
      "\"max_length\": ", o.max_history, "},\n"
      "             {\"column\": \"history_category\", \"multi_hot\": \"|\", \"ids_like\": "
      "\"category\", \"max_length\": ", o.max_history, "}]\n"
      "}\n");
  PS_RETURN_IF_ERROR(WriteFileAtomically(schema_path, schema));
  HistoryWorldReport report;
  report.rows = o.rows;
  double positives = 0;
  for (float l : labels) positives += l;
  report.positive_rate = positives / o.rows;
  report.oracle_auc = RocAuc(std::span<const double>(probs), std::span<const float>(labels));
  report.bytes = text.size();
  if (conversions) {
    double converted = 0;
    for (float l : conversion_labels) converted += l;
    report.conversion_rate = conversion_labels.empty() ? 0 : converted / conversion_labels.size();
    report.conversion_oracle_auc =
        RocAuc(std::span<const double>(conversion_probs), std::span<const float>(conversion_labels));
  }
  return report;
}

}  // namespace pstrain::worker
