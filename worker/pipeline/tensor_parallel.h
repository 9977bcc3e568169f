// TensorParallelLayout: how the tower of a pipelined model is cut over a
// tensor-parallel group of T workers (--tensor_parallel=T), and which
// parameter tables each rank of the group pulls and pushes.
//
// Within each pipeline stage, consecutive tower layers are paired
// Megatron-style: a column-parallel layer (W and b cut by output rows) then
// a row-parallel layer (W cut by the matching input columns, b whole), so
// that a pair costs one AllReduce forward and one backward (LayerStack).
// The logit layer, a layer left without a partner at the end of a stage, a
// layer narrower than T and the head stay replicated: every rank of the
// group computes them.
//
// Tables. The job's table list is the model's, followed by one slice table
// per split table and rank, named "<table>.tp<t>of<T>" (e.g.
// "tower.3.weight.tp0of2"), with the full table's initializer and
// optimizer; the full tables that are split are marked on_workers, so the
// servers hold only the slices (the optimizer runs on slices) and no rank
// pulls a full split table. Rank t pulls its slices and every replicated
// table it computes with, and pushes only its slices; replicated tables
// (biases of row layers, unsplit layers, the head's dense tables and the
// embeddings) are pushed by rank 0 alone. A slice table starts from its
// own draws of the full table's distribution (the initializer is seeded by
// table id), not from the same values as an unsplit job with that seed.
//
// Immutable after Create(); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "model/nn/layer_stack.h"
#include "worker/pipeline/pipeline_model.h"

namespace pstrain::worker {

// Slice table `table` is the block [row_begin, row_end) x [col_begin,
// col_end) of model table `full`, a row-major [full_rows x full_cols]
// matrix (a bias is [out x 1]).
struct TpSlice {
  uint32_t table = 0;
  uint32_t full = 0;
  int tp_rank = 0;
  int full_rows = 0, full_cols = 0;
  int row_begin = 0, row_end = 0;
  int col_begin = 0, col_end = 0;
  size_t size() const {
    return static_cast<size_t>(row_end - row_begin) * static_cast<size_t>(col_end - col_begin);
  }
};

class TensorParallelLayout {
 public:
  // `tables` are the model's (ids = positions). T = 1 gives the unsplit
  // layout (no slices, every table pushed by its stage). InvalidArgument for
  // T < 1.
  static absl::StatusOr<TensorParallelLayout> Create(const std::vector<TableSpec>& tables,
                                                     const PipelineModelSpec& spec,
                                                     const StagePartition& partition, int tp);

  int tp() const { return tp_; }
  // The job's tables: the model's, then the slices (see the file comment).
  const std::vector<TableSpec>& tables() const { return tables_; }
  const std::vector<TpSlice>& slices() const { return slices_; }
  // How tower layer i is split.
  TpSplit split(int layer) const { return split_[layer]; }

  // The tower layers of `stage` as rank `tp_rank` computes them: local
  // shapes, slice tables, splits.
  std::vector<LinearSpec> StageLayers(int stage, int tp_rank) const;
  // Of `used` (the dense tables a rank computes with), those it pushes:
  // its slices, and on rank 0 the replicated tables.
  std::vector<uint32_t> PushedTables(const std::vector<uint32_t>& used, int tp_rank) const;
  // True when `table` is a slice table.
  bool IsSlice(uint32_t table) const { return table >= model_tables_; }

  // Copies a slice's block out of the full table / into it.
  void Extract(const TpSlice& s, const float* full, float* out) const;
  void Insert(const TpSlice& s, const float* in, float* full) const;

  // "layers 0-1 column+row, 2 replicated, 3 (logit) replicated".
  std::string Describe() const;

 private:
  int tp_ = 1;
  size_t model_tables_ = 0;
  std::vector<LinearSpec> tower_;  // full shapes, model table ids
  StagePartition partition_;
  std::vector<TpSplit> split_;
  std::vector<TableSpec> tables_;
  std::vector<TpSlice> slices_;
  // slice_of_[full table id][rank] = slice table id (or UINT32_MAX).
  std::vector<std::vector<uint32_t>> slice_of_;
};

// Worker rank w = (replica * P + stage) * T + tp: the T ranks of a
// tensor-parallel group are consecutive, then the stages of a replica.
struct WorkerPlace {
  int replica = 0;
  int stage = 0;
  int tp = 0;
};
inline WorkerPlace PlaceOf3d(int rank, int stages, int tp) {
  return {rank / (stages * tp), (rank / tp) % stages, rank % tp};
}
inline int RankOf3d(int replica, int stage, int tp_rank, int stages, int tp) {
  return (replica * stages + stage) * tp + tp_rank;
}

}  // namespace pstrain::worker
