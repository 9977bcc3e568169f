#include "worker/pipeline/tensor_parallel.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace pstrain::worker {
namespace {

// Rank t's share [begin, end) of n items over T ranks (sizes differ by <= 1).
int ShareBegin(int n, int tp, int t) { return static_cast<int>(static_cast<int64_t>(n) * t / tp); }

const char* SplitName(TpSplit s) {
  switch (s) {
    case TpSplit::kColumn:
      return "column";
    case TpSplit::kRow:
      return "row";
    case TpSplit::kNone:
      break;
  }
  return "replicated";
}

}  // namespace

absl::StatusOr<TensorParallelLayout> TensorParallelLayout::Create(
    const std::vector<TableSpec>& tables, const PipelineModelSpec& spec,
    const StagePartition& partition, int tp) {
  if (tp < 1) return absl::InvalidArgumentError("--tensor_parallel must be >= 1");
  TensorParallelLayout l;
  l.tp_ = tp;
  l.model_tables_ = tables.size();
  l.tower_ = spec.tower;
  l.partition_ = partition;
  l.tables_ = tables;
  const int n = static_cast<int>(spec.tower.size());
  l.split_.assign(n, TpSplit::kNone);
  l.slice_of_.assign(tables.size(), std::vector<uint32_t>(tp, UINT32_MAX));
  if (tp == 1) return l;
  for (int k = 0; k < partition.stages(); ++k) {
    for (int i = partition.begin(k); i < partition.end(k);) {
      // A pair needs two layers of this stage, the second not the logit, and
      // at least one column of the middle activation per rank.
      if (i + 1 < partition.end(k) && i + 1 < n - 1 && spec.tower[i].out >= tp) {
        l.split_[i] = TpSplit::kColumn;
        l.split_[i + 1] = TpSplit::kRow;
        i += 2;
      } else {
        ++i;
      }
    }
  }
  auto add_slice = [&](uint32_t full, int t, int rows, int cols, int r0, int r1, int c0, int c1) {
    TableSpec s = tables[full];
    s.id = static_cast<uint32_t>(l.tables_.size());
    s.name = absl::StrCat(tables[full].name, ".tp", t, "of", tp);
    TpSlice slice{s.id, full, t, rows, cols, r0, r1, c0, c1};
    s.size = slice.size();
    s.on_workers = false;
    l.tables_.push_back(s);
    l.slices_.push_back(slice);
    l.slice_of_[full][t] = s.id;
    l.tables_[full].on_workers = true;  // the servers hold the slices only
  };
  for (int i = 0; i < n; ++i) {
    const LinearSpec& f = spec.tower[i];
    for (int t = 0; t < tp && l.split_[i] != TpSplit::kNone; ++t) {
      if (l.split_[i] == TpSplit::kColumn) {
        const int r0 = ShareBegin(f.out, tp, t), r1 = ShareBegin(f.out, tp, t + 1);
        add_slice(f.weight, t, f.out, f.in, r0, r1, 0, f.in);
        add_slice(f.bias, t, f.out, 1, r0, r1, 0, 1);
      } else {
        const int c0 = ShareBegin(f.in, tp, t), c1 = ShareBegin(f.in, tp, t + 1);
        add_slice(f.weight, t, f.out, f.in, 0, f.out, c0, c1);
      }
    }
  }
  return l;
}

std::vector<LinearSpec> TensorParallelLayout::StageLayers(int stage, int tp_rank) const {
  std::vector<LinearSpec> out;
  for (int i = partition_.begin(stage); i < partition_.end(stage); ++i) {
    LinearSpec l = tower_[i];
    l.split = split_[i];
    if (l.split == TpSplit::kColumn) {
      l.out = ShareBegin(l.out, tp_, tp_rank + 1) - ShareBegin(l.out, tp_, tp_rank);
      l.weight = slice_of_[tower_[i].weight][tp_rank];
      l.bias = slice_of_[tower_[i].bias][tp_rank];
    } else if (l.split == TpSplit::kRow) {
      l.in = ShareBegin(l.in, tp_, tp_rank + 1) - ShareBegin(l.in, tp_, tp_rank);
      l.weight = slice_of_[tower_[i].weight][tp_rank];
    }
    out.push_back(l);
  }
  return out;
}

std::vector<uint32_t> TensorParallelLayout::PushedTables(const std::vector<uint32_t>& used,
                                                         int tp_rank) const {
  std::vector<uint32_t> out;
  for (uint32_t t : used) {
    if (IsSlice(t) || tp_rank == 0) out.push_back(t);
  }
  return out;
}

void TensorParallelLayout::Extract(const TpSlice& s, const float* full, float* out) const {
  const size_t w = static_cast<size_t>(s.col_end - s.col_begin);
  for (int r = s.row_begin; r < s.row_end; ++r) {
    std::memcpy(out + (r - s.row_begin) * w,
                full + static_cast<size_t>(r) * s.full_cols + s.col_begin, w * sizeof(float));
  }
}

void TensorParallelLayout::Insert(const TpSlice& s, const float* in, float* full) const {
  const size_t w = static_cast<size_t>(s.col_end - s.col_begin);
  for (int r = s.row_begin; r < s.row_end; ++r) {
    std::memcpy(full + static_cast<size_t>(r) * s.full_cols + s.col_begin,
                in + (r - s.row_begin) * w, w * sizeof(float));
  }
}

std::string TensorParallelLayout::Describe() const {
  std::vector<std::string> parts;
  const int n = static_cast<int>(split_.size());
  for (int i = 0; i < n; ++i) {
    parts.push_back(absl::StrCat(i, i + 1 == n ? " (logit)" : "", ": ", SplitName(split_[i])));
  }
  return absl::StrCat("tensor-parallel over ", tp_, " ranks, tower layers ",
                      absl::StrJoin(parts, ", "));
}

}  // namespace pstrain::worker
