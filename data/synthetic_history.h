// A behaviour-history world (`pstrain gen --history=L`): click data whose
// strongest signal is a user's recent behaviour, for models that attend to
// it (DIN's target attention) against models that pool it or ignore it.
//
// Items belong to topics (item % topics). A user has two favourite topics;
// the history lists up to L items the user clicked before (oldest first,
// "|"-separated), most from those topics, some at random. The candidate
// item is from a favourite topic half the time. The teacher's logit is
//   bias + item and user main effects + a dense effect
//   + relevance x strength,
// relevance being 1 when an item of the candidate's topic is among the last
// history items, 0.4 when one of a neighbouring topic is, else 0: the user's
// interest is shown only through the history, and a sum over all of it
// dilutes it with the unrelated items. Rows: CSV with a header,
//   clicked,age,price,user,item,category,history,history_category
// (category: an item's topic; history_category: the history's items'), and
// a schema file for it (the histories' ids are the item and category
// columns').
//
// With tasks = 2 a second label follows the click, "converted" (a
// purchase after the click, ESMM's conversion): 0/1 on clicked rows, empty
// on the others (no conversion is observed without a click; the schema's
// "labels" reads it and a head on it learns from the clicked rows only).
// Its logit shares the click's relevance and item effect and adds a user
// propensity of its own and the price:
//   conv_bias + 1.5 relevance + 0.5 item effect + 0.8 user propensity
//   - 0.6 log(price) / log(500).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace pstrain::worker {

struct HistoryWorldOptions {
  int64_t rows = 100000;
  int64_t first_row = 0;
  uint64_t seed = 1;
  int max_history = 30;   // L
  int topics = 50;
  int items_per_topic = 200;
  int users = 20000;
  double strength = 2.5;  // the relevance's weight in the logit
  double positive_rate = 0.25;
  int tasks = 1;                      // 2: the "converted" label too
  double conversion_rate = 0.3;       // of clicked rows
};

struct HistoryWorldReport {
  int64_t rows = 0;
  double positive_rate = 0;
  double oracle_auc = 0;
  // tasks = 2: over the clicked rows.
  double conversion_rate = 0;
  double conversion_oracle_auc = 0;
  uint64_t bytes = 0;
};

// Writes `options.rows` rows to `path` (CSV, header first) and the schema
// that reads them to `schema_path`.
absl::StatusOr<HistoryWorldReport> WriteHistoryWorld(const HistoryWorldOptions& options,
                                                     const std::string& path,
                                                     const std::string& schema_path);

}  // namespace pstrain::worker
