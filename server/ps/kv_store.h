// KvStore: this server's shards of every table (or, with executor threads,
// one part of them), and the validated execution of pull and push requests
// against them.
//
// Parts (--server_threads): part p of `parts` holds the sparse rows with
// SparseOwnerPart(id) == p and piece p of each dense range (PieceOf). Every
// part validates requests against the whole server's shard; Pull and Push
// take ops already cut to the part (ShardSet does the cutting).
//
// Every request is checked in full before anything changes: table ids,
// kinds, ranges this server holds, ids this server owns, payload shapes and
// dims. A push with a non-finite gradient is refused by the table, which
// stays unchanged. Not thread-safe: the server's owner thread calls it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto_msgs/codec.h"
#include "proto_msgs/messages.h"
#include "server/ps/tables/dense_shard.h"
#include "server/ps/tables/disk_tier.h"
#include "server/ps/tables/sparse_table.h"

namespace pstrain::server {

// A validated part of a request, pointing into the request's payloads.
struct KvOp {
  uint32_t table = 0;
  bool sparse = false;
  uint64_t begin = 0;  // dense
  uint64_t count = 0;  // dense: floats; sparse: ids
  std::span<const uint64_t> ids;    // sparse
  std::span<const float> values;    // push: gradients
};

struct TableStats {
  std::string name;
  bool sparse = false;
  uint64_t rows = 0;   // sparse rows, or dense floats held
  uint64_t bytes = 0;
  // Sparse: of `bytes`, the index and the per-request scratch buffers.
  uint64_t index_bytes = 0;
  uint64_t scratch_bytes = 0;
  // Sparse: of `bytes`, the rows' values and optimizer state.
  uint64_t value_bytes = 0;
  uint64_t state_bytes = 0;
  // Sparse with admission: the sketch's bytes (in `bytes`) and the
  // admission counters (AdmissionStats).
  uint64_t sketch_bytes = 0;
  uint64_t admitted = 0;
  uint64_t refused_ids = 0;
  uint64_t refused_pushes = 0;
  // Sparse with eviction: rows removed for max_rows and for ttl_steps.
  uint64_t evicted_capacity = 0;
  uint64_t evicted_ttl = 0;
  // Sparse with a disk tier: rows in RAM and on disk (`rows` counts both;
  // the byte counts are RAM's), TierCounters, and the tier's file bytes
  // (the tier is shared by the part's tables: each table reports it whole).
  bool tiered = false;
  uint64_t ram_rows = 0;
  uint64_t disk_rows = 0;
  uint64_t tier_reads = 0;
  uint64_t tier_hits = 0;
  uint64_t tier_writes = 0;
  uint64_t tier_disk_bytes = 0;
};

// Tables larger than RAM (--server_memory_budget, --tier_dir): each server
// part keeps its sparse rows past its share of the budget in a disk tier.
struct TierConfig {
  std::string dir;                // the server's tier folder; one subfolder per part
  uint64_t memory_budget = 0;     // bytes per server; 0: no tier
  TierStore store = TierStore::kSlots;
  bool enabled() const { return memory_budget > 0; }
};

class KvStore {
 public:
  // Creates part `part` of the shards that `layout` assigns to server `rank`.
  // With `tier` enabled the part's share of the budget (budget / parts, less
  // the tier's fixed memory, the dense shards and kProcessBytes) is split
  // evenly between its sparse tables and turned into RAM rows; the rest go
  // to the tier in `tier.dir`/server<rank>-part<part>. InvalidArgument when
  // the budget leaves too little for rows, naming what it must hold.
  static absl::StatusOr<std::unique_ptr<KvStore>> Create(const proto::TableLayout& layout,
                                                         int rank, int part = 0, int parts = 1,
                                                         const TierConfig& tier = {});
  // What a server process holds beside its tables (buffers, threads, code).
  static constexpr uint64_t kProcessBytes = uint64_t{64} << 20;
  // Fewest RAM rows a table with a tier may have.
  static constexpr uint64_t kMinRamRows = 1024;

  // The piece [begin, begin + length) of a server's dense range
  // [offset, offset + length) that part `part` of `parts` holds; length 0
  // when it holds none. Small ranges are not cut: one part (chosen by the
  // table id) holds them whole. Pieces are contiguous, in part order, and
  // cover the range.
  struct Piece {
    uint64_t begin = 0, length = 0;
  };
  static Piece PieceOf(uint32_t table, uint64_t offset, uint64_t length, int part, int parts);

  // Checks a pull/push request and resolves its parts.
  absl::StatusOr<std::vector<KvOp>> Validate(const proto::Decoded& request,
                                             const proto::KvRequest& body, bool is_push) const;

  // Reads the values of validated pull parts: one payload per part.
  absl::Status Pull(const std::vector<KvOp>& ops, std::vector<Buffer>* out);
  // Applies validated push parts, each gradient multiplied by `scale`.
  // `step`: the worker clock of the push, for the tables' warm-up (-1: none).
  absl::Status Push(const std::vector<KvOp>& ops, float scale, int64_t step = -1);

  // Writes every section this server holds to a checkpoint shard file.
  // Returns {bytes, checksum}.
  absl::StatusOr<std::pair<uint64_t, std::string>> SaveShard(const std::string& path,
                                                             uint64_t step) const {
    return SaveShard({this}, path, step);
  }
  // The same for a server whose shard is split into `parts` (all the parts
  // of one server, in part order): one file, as if written unsplit.
  static absl::StatusOr<std::pair<uint64_t, std::string>> SaveShard(
      const std::vector<const KvStore*>& parts, const std::string& path, uint64_t step);
  // Loads what this server owns under the current layout from the shard
  // files of a checkpoint written by any number of servers (re-sharding:
  // dense ranges re-cut, sparse rows re-routed by SparseOwner). Tables start
  // empty; every dense range must be covered.
  absl::Status Restore(const std::vector<std::string>& shard_files);

  // Rows [offset, offset + max_rows) of sparse table `table` (iteration
  // order) into `ids` / `values`; returns the rows the table holds.
  absl::StatusOr<uint64_t> Dump(uint32_t table, uint64_t offset, uint64_t max_rows,
                                std::vector<uint64_t>* ids, std::vector<float>* values) const;

  // Versioned exports (proto::DumpRequest version 2, kv_store_export.cc):
  // cuts sparse table `table`'s change log for export `seq` (a base when
  // `full`, else a delta since export `since`: ChangeLog::Cut).
  absl::Status CutChanges(uint32_t table, uint64_t seq, bool full, uint64_t since);
  // Entries [offset, offset + max_rows) of the last cut, changed rows (ids
  // and current values) then removed ids; returns the cut's entries.
  absl::StatusOr<uint64_t> DumpChanges(uint32_t table, uint64_t offset, uint64_t max_rows,
                                       std::vector<uint64_t>* ids, std::vector<float>* values,
                                       std::vector<uint64_t>* removed);

  const proto::TableLayout& layout() const { return layout_; }
  int rank() const { return rank_; }
  int part() const { return part_; }
  int parts() const { return parts_; }
  // The server's dense range of `table` ({0, 0} when it has none).
  Piece server_range(uint32_t table) const { return server_ranges_[table]; }
  // True when this server (any part) holds a share of `table`.
  bool holds(uint32_t table) const {
    return sparse_[table] != nullptr || server_ranges_[table].length > 0;
  }
  DenseShard* dense(uint32_t table) { return dense_[table].get(); }
  SparseTable* sparse(uint32_t table) { return sparse_[table].get(); }
  std::vector<TableStats> Stats() const;

 private:
  KvStore(proto::TableLayout layout, int rank, int part, int parts)
      : layout_(std::move(layout)), rank_(rank), part_(part), parts_(parts) {}
  // Creates the disk tier and gives the sparse tables their RAM capacity.
  absl::Status AttachTier(const TierConfig& tier);

  proto::TableLayout layout_;
  int rank_;
  int part_, parts_;
  std::unique_ptr<DiskTier> tier_;  // before the tables: they use it
  std::vector<Piece> server_ranges_;                 // by table id
  std::vector<std::unique_ptr<DenseShard>> dense_;    // by table id; null if not held
  std::vector<std::unique_ptr<SparseTable>> sparse_;  // by table id; null for dense tables
};

}  // namespace pstrain::server
