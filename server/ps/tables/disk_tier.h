// DiskTier: the on-disk rows of one server part's sparse tables (the part
// that one owner thread holds), for tables larger than the server's RAM
// (--server_memory_budget). A SparseTable with a tier keeps its hot rows in
// RAM and the rest here, through its TableTier (table_tier.h): rows it drops
// for its RAM capacity are written back (only those changed since they were
// read), and a request for a row that is not in RAM reads it here in one
// batched lookup per request (and brings it into RAM once it is used
// enough).
//
// Two stores: slots (the default; server/ps/tables/slot_store.h: fixed-size
// slots in memory-mapped files and an in-RAM id index, a miss is a copy
// from the page cache) and RocksDB, described here.
//
// RocksDB keys are [table id, u32 big-endian][row id, u64 big-endian], so one
// table's rows are one key range; values are a row's bytes as the table
// stores it in RAM (values, optimizer state, step, eviction metadata). No
// compression (embedding rows do not compress), a Bloom filter per file
// (a lookup of an id the tier lacks reads no data block), and small fixed
// memory: two 8 MiB memtables and a 16 MiB block cache that also holds the
// files' index and filter blocks (kFixedBytes), so the process's resident
// memory stays near the RAM rows' bytes; the operating system's page cache
// serves the rest of the reads.
//
// The tier is scratch, not a checkpoint: a server's rows live in its
// checkpoints, and a tier folder left by an earlier process is erased when
// tables are created (restore fills it again). CheckFolder, run when the
// server starts, refuses a folder RocksDB cannot open, naming it.
//
// Not thread-safe, like SparseTable: one owner thread makes every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace rocksdb {
class DB;
class Cache;
class WriteBatch;
}  // namespace rocksdb

namespace pstrain::server {

class SlotStore;

// Where the tier keeps its rows.
enum class TierStore : uint8_t {
  kSlots,    // fixed-size slots in mapped files (server/ps/tables/slot_store.h)
  kRocksDb,  // a RocksDB database
};

class DiskTier {
 public:
  // Memory the tier itself holds whatever the rows: memtables, block cache
  // and RocksDB's own structures (an estimate with margin).
  static constexpr size_t kFixedBytes = size_t{48} << 20;

  // Opens (creating) the tier in folder `path`, erasing any rows an earlier
  // process left there. An error names the folder and RocksDB's reason.
  static absl::StatusOr<std::unique_ptr<DiskTier>> Open(const std::string& path,
                                                        TierStore store = TierStore::kSlots);

  // For a server starting: every RocksDB folder directly under `root`
  // (the tiers of an earlier process; with rank >= 0 only that server's,
  // server<rank>-part*) must open cleanly; one that does not is refused
  // with its name and why (corrupt files are not erased silently: the
  // operator decides). Creates `root` when missing and checks that it is
  // writable.
  static absl::Status CheckFolder(const std::string& root, int rank = -1);

  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  const std::string& path() const { return path_; }

  // Looks up ids of `table`: for each i with found[i], out[i * row_bytes,
  // +row_bytes) holds its row. found[i] is 0 for an id the tier lacks, else
  // 1 + the row's recent uses (SlotStore::Get; count_uses: this read is
  // one; `epoch` ages them) or kUsesUnknown (RocksDB keeps no counts). An
  // error (I/O, corruption) names the tier.
  static constexpr uint8_t kUsesUnknown = 255;
  absl::Status Get(uint32_t table, std::span<const uint64_t> ids, size_t row_bytes, char* out,
                   std::vector<uint8_t>* found, bool count_uses = false, uint16_t epoch = 0);

  // Queues a row write (Commit writes the queue in one batch).
  void Put(uint32_t table, uint64_t id, const void* row, size_t row_bytes);
  // Writes the queued rows atomically. An error (a full disk) names the tier;
  // the rows of the failed batch are not on disk.
  absl::Status Commit();

  // Calls fn for every row of `table` on disk, in id order of its encoding.
  absl::Status ForEach(uint32_t table, size_t row_bytes,
                       absl::FunctionRef<void(uint64_t id, const char* row)> fn) const;

  // Deletes every row of `table`.
  absl::Status Clear(uint32_t table);

  // Bytes of the tier's files on disk (all tables), and of its memtables.
  uint64_t disk_bytes() const;
  uint64_t memtable_bytes() const;
  // RAM of the tier's own id index of `table` (slot store; 0 for RocksDB).
  uint64_t index_bytes(uint32_t table) const;

 private:
  DiskTier(std::string path, std::unique_ptr<rocksdb::DB> db, std::shared_ptr<rocksdb::Cache> cache);
  DiskTier(std::string path, std::unique_ptr<SlotStore> slots);

  const std::string path_;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<rocksdb::WriteBatch> batch_;
  std::unique_ptr<SlotStore> slots_;  // the store when TierStore::kSlots
  // Per-call scratch of Get.
  std::vector<std::string> keys_;
};

}  // namespace pstrain::server
