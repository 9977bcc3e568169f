// SchemaJson (schema_file.h): a resolved custom schema as the JSON a saved
// model records, every column by index and every statistic given; read back
// by SchemaFromJson (schema_file.cc), which resolves it like a schema file.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/label_rule.h"
#include "data/schema_file.h"

namespace pstrain::worker {

using nlohmann::json;

const char* TransformName(Transform t) {
  switch (t) {
    case Transform::kNone: return "none";
    case Transform::kLog1p: return "log1p";
    case Transform::kLog1pClamp: return "log1p_clamp";
    case Transform::kStandardize: return "standardize";
  }
  return "none";
}

const char* PoolingName(BagPooling p) { return p == BagPooling::kMean ? "mean" : "sum"; }

json SchemaJson(const Schema& s) {
  const auto label_json = [](const LabelColumn& l) {
    json label = {{"column", l.column}};
    if (l.op != LabelColumn::Op::kBinary) {
      label["op"] = LabelOpName(l.op);
      label["threshold"] = l.threshold;
    }
    return label;
  };
  const json label = label_json(s.label);
  json dense = json::array();
  for (const DenseColumn& d : s.dense) {
    json e = {{"column", d.column}, {"transform", TransformName(d.transform)}};
    auto bound = [](double b) { return std::isfinite(b) ? json(b) : json(nullptr); };
    if (std::isfinite(d.clip_lo) || std::isfinite(d.clip_hi)) {
      e["clip"] = json::array({bound(d.clip_lo), bound(d.clip_hi)});
    }
    if (d.missing_given) {
      e["missing"] = d.missing;
    } else if (d.transform == Transform::kStandardize) {
      e["missing"] = "mean";
    }
    if (d.time != TimePart::kNone) e["time"] = TimePartName(d.time);
    if (d.transform == Transform::kStandardize && d.has_stats) {
      e["mean"] = d.mean;
      e["stddev"] = d.stddev;
    }
    dense.push_back(std::move(e));
  }
  json sparse = json::array();
  for (const SparseColumn& c : s.sparse) {
    json e = {{"column", c.column}, {"hash_buckets", c.hash_buckets},
              {"pooling", PoolingName(c.pooling)}};
    if (c.multi_hot_sep != 0) e["multi_hot"] = std::string(1, c.multi_hot_sep);
    if (c.embedding_dim > 0) e["embedding_dim"] = c.embedding_dim;
    if (c.ids_of >= 0) e["ids_like"] = s.sparse[c.ids_of].column;
    if (c.max_length > 0) e["max_length"] = c.max_length;
    if (c.time != TimePart::kNone) e["time"] = TimePartName(c.time);
    sparse.push_back(std::move(e));
  }
  json out = {{"separator", std::string(1, s.field_sep)},
              {"header", s.header},
              {"num_columns", s.num_columns},
              {"label", label},
              {"dense", dense},
              {"sparse", sparse},
              {"max_line_bytes", s.max_line_bytes},
              {"missing_values", s.missing_tokens},
              {"ignore", "rest"}};
  if (!s.column_names.empty()) {
    // The files' own columns; the partition columns follow them.
    const size_t own = s.column_names.size() - std::min(s.column_names.size(),
                                                        s.partition_columns.size());
    out["columns"] = std::vector<std::string>(s.column_names.begin(),
                                              s.column_names.begin() + static_cast<long>(own));
  }
  if (!s.partition_columns.empty()) out["partition_columns"] = s.partition_columns;
  if (s.parquet) out["format"] = "parquet";
  if (!s.extra_labels.empty()) {
    json labels = json::object();
    for (const LabelColumn& l : s.extra_labels) labels[l.name] = label_json(l);
    out["labels"] = labels;
  }
  return out;
}

}  // namespace pstrain::worker
