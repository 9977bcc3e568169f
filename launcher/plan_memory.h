// The server sizing of `pstrain plan --server_memory=64GiB`: the bytes each
// table of the model takes on the parameter servers, in total, and how many
// servers of that memory hold them.
//
// A sparse table of R rows of dim d takes R x its row's footprint
// (server/ps/tables/row_footprint.h, the layout the table itself uses):
//   values  d x 4 bytes (fp16, bf16: 2, an odd dim padded to a float)
//   state   the optimizer's: sgd 0 (with momentum d floats), adagrad d,
//           rowwise_adagrad 1, adam 2d + a step count, ftrl 2d floats
//   overhead the index slot (at most 22.5 bytes, measured 15-21 on real
//           shards), the 2 MiB chunks' slack, 8 bytes with eviction
// R is the field's hash buckets (--hash_buckets or the schema's), or
// --max_rows when smaller; a table of unbounded ids needs the rows
// expected (--rows). A dense table of P floats takes P x 4 x (1 + the
// optimizer's planes), spread over all servers; in allreduce mode the
// dense tables live on the workers and take nothing here.
//
// Servers: rows are spread by hash(id) mod S and dense tables cut in even
// ranges, so each server holds 1/S of the tables, plus what does not
// shrink with S: KvStore::kProcessBytes (64 MiB) for the process and
// kShardFixedBytes (6 MiB) for each table's shard. S is the least number
// of servers whose share fits (1 - headroom) x their memory; the headroom
// is for what the plan does not count: an index growing (its old array,
// 15 bytes a row of the table, lives while the new one fills), requests in
// flight, the allocator's and the kernel's own. Pure functions;
// thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"

namespace pstrain::launcher {

// How many rows a sparse table holds, and why.
struct TableRows {
  uint64_t rows = 0;
  std::string from;  // "hash_buckets", "max_rows", "--rows"
};

struct TableSizing {
  std::string name;
  bool sparse = true;
  uint64_t rows = 0;   // sparse: rows; dense: 1
  uint64_t width = 0;  // sparse: dim; dense: floats
  std::string rows_from;
  std::string dtype;      // fp32, fp16, bf16
  std::string optimizer;  // e.g. "adagrad"
  double value_bytes = 0, state_bytes = 0, overhead_bytes = 0;
  double total() const { return value_bytes + state_bytes + overhead_bytes; }
  double bytes_per_row() const { return rows > 0 ? total() / static_cast<double>(rows) : 0; }
};

struct MemoryPlan {
  std::vector<TableSizing> tables;  // sparse first, in the model's order
  double value_bytes = 0, state_bytes = 0, overhead_bytes = 0;
  double total() const { return value_bytes + state_bytes + overhead_bytes; }
  double server_memory = 0;  // bytes of each server
  double headroom = 0;       // share of it left free
  double fixed_per_server = 0;  // the process and each table's shard
  int servers = 0;              // the least S that fits
  double per_server = 0;        // bytes each of the S holds, fixed part included
};

// The sizing of `tables` (the job's, with their optimizers, dtypes and
// eviction) with `rows[i]` for sparse table tables[i] (ignored for dense
// ones). InvalidArgument when a table cannot be sized (a bad optimizer, a
// sparse table without rows) or when the fixed part alone does not fit in
// (1 - headroom) x server_memory.
absl::StatusOr<MemoryPlan> PlanServerMemory(const std::vector<TableSpec>& tables,
                                            const std::vector<TableRows>& rows,
                                            double server_memory, double headroom);

// The rows of `table` (a sparse table named "<prefix>.<field>", the field
// named as worker::SparseFieldName names it: "emb.carrier", "emb.C3"): min of
// the field's hash buckets (`field_buckets`, by that name; 0: unbounded) and
// the table's eviction max_rows, those that are set; `expected` (> 0) when
// smaller or when neither is. NotFound (a usage error for the caller) when
// none of the three bounds it.
absl::StatusOr<TableRows> RowsOfTable(const TableSpec& table,
                                      const std::map<std::string, uint64_t>& field_buckets,
                                      uint64_t expected);

// "--rows=50M"-style counts: an integer, a decimal with k, m, g or t
// (powers of 1000), or 1e8. InvalidArgument naming `flag` otherwise.
absl::StatusOr<uint64_t> ParseRowCount(const std::string& flag, const std::string& text);

// The sizing as the table `pstrain plan` prints, and as one JSON object.
std::string MemoryPlanText(const MemoryPlan& plan, const std::string& model);
std::string MemoryPlanJson(const MemoryPlan& plan, const std::string& model);

}  // namespace pstrain::launcher
