#include "server/coordinator/table_layout.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::server {

absl::Status ValidateTableSpecs(const std::vector<TableSpec>& tables) {
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableSpec& t = tables[i];
    if (t.id != i) {
      return absl::InvalidArgumentError(absl::StrCat("table ", t.name, " has id ", t.id,
                                                     " at position ", i));
    }
    if (t.name.empty() || !names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("table ", i, ": empty or duplicate name '",
                                                     t.name, "'"));
    }
    if (t.kind == TableKind::kDense) {
      if (t.size == 0 || t.size > (uint64_t{1} << 36)) {
        return absl::InvalidArgumentError(absl::StrCat("dense table ", t.name, " has size ", t.size));
      }
    } else if (t.kind == TableKind::kSparse) {
      if (t.on_workers) {
        return absl::InvalidArgumentError(absl::StrCat("sparse table ", t.name,
                                                       " cannot live on the workers"));
      }
      if (t.dim == 0 || t.dim > 4096) {
        return absl::InvalidArgumentError(absl::StrCat("sparse table ", t.name, " has dim ", t.dim));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("table ", t.name, " has an unknown kind"));
    }
    if (static_cast<int>(t.optimizer.kind) > static_cast<int>(OptimizerKind::kFtrl)) {
      return absl::InvalidArgumentError(absl::StrCat("table ", t.name, ": unknown optimizer"));
    }
    if (!(t.optimizer.lr >= 0) || !(t.optimizer.lr < 1e6)) {
      return absl::InvalidArgumentError(absl::StrCat("table ", t.name, ": bad learning rate"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::TableLayout> ComputeLayout(const std::vector<TableSpec>& tables,
                                                 int num_servers, uint64_t chunk_floats) {
  if (num_servers <= 0) return absl::InvalidArgumentError("no servers");
  PS_RETURN_IF_ERROR(ValidateTableSpecs(tables));
  proto::TableLayout layout;
  layout.tables = tables;
  layout.num_servers = num_servers;
  std::vector<uint64_t> load(num_servers, 0);
  // Place big tables first (split evenly), then small ones greedily.
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense || t.on_workers || t.size <= chunk_floats) continue;
    for (int s = 0; s < num_servers; ++s) {
      uint64_t begin = t.size * s / num_servers;
      uint64_t end = t.size * (s + 1) / num_servers;
      if (end == begin) continue;
      layout.dense_ranges.push_back({t.id, s, begin, end - begin});
      load[s] += end - begin;
    }
  }
  for (const TableSpec& t : tables) {
    if (t.kind != TableKind::kDense || t.on_workers || t.size > chunk_floats) continue;
    int s = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
    layout.dense_ranges.push_back({t.id, s, 0, t.size});
    load[s] += t.size;
  }
  std::sort(layout.dense_ranges.begin(), layout.dense_ranges.end(),
            [](const proto::DenseRange& a, const proto::DenseRange& b) {
              return a.table != b.table ? a.table < b.table : a.begin < b.begin;
            });
  return layout;
}

bool SameTables(const std::vector<TableSpec>& a, const std::vector<TableSpec>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const TableSpec& x = a[i];
    const TableSpec& y = b[i];
    if (x.id != y.id || x.name != y.name || x.kind != y.kind || x.size != y.size ||
        x.dim != y.dim || x.on_workers != y.on_workers || x.optimizer.kind != y.optimizer.kind || x.optimizer.lr != y.optimizer.lr ||
        x.init.kind != y.init.kind || x.init.scale != y.init.scale || x.init.seed != y.init.seed) {
      return false;
    }
  }
  return true;
}

}  // namespace pstrain::server
