// SlotStore: the disk tier's rows in fixed-size slots of one file per table
// (each slot its id and the row's bytes), mapped into memory, with an in-RAM
// index from id to slot (DiskTier's
// default store; RocksDB is the other).
//
// A row is written to its slot (a new id gets the next one) and read back
// with a memcpy from the mapping: a miss costs an index lookup and a copy
// from the page cache, with no system call, where a RocksDB point lookup
// costs a pread of a block and its search (3.5-9 us on the development VM;
// a pread alone 1.9 us). The file's pages are the operating system's:
// clean ones are dropped and dirty ones written back under memory pressure
// (they show in the process's RssFile, not RssAnon; a cgroup's limit
// reclaims them). Space is reserved with fallocate in steps before a slot
// is used, so a full disk is an error from Put's batch (Commit), never a
// SIGBUS on a write to the mapping.
//
// Each file starts with a 4 KiB header (magic, table, row bytes); Check
// refuses a file whose header is damaged. Like the RocksDB store, the tier
// is scratch: Open erases what an earlier process left.
//
// Not thread-safe: one owner thread makes every call.
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
#include "server/ps/tables/page_buffer.h"
#include "server/ps/tables/row_index.h"

namespace pstrain::server {

class SlotStore {
 public:
  static absl::StatusOr<std::unique_ptr<SlotStore>> Open(const std::string& path);
  // OK when every slot file in `path` has a sound header; else names it.
  static absl::Status Check(const std::string& path);
  ~SlotStore();
  SlotStore(const SlotStore&) = delete;
  SlotStore& operator=(const SlotStore&) = delete;

  // Copies the rows of `ids` to out[i * row_bytes]. (*found)[i]: 0 when the
  // store lacks ids[i], else 1 + its uses (at most 254): with count_uses,
  // this read is one more use. Uses are halved for each epoch since the
  // row's last counted use (the caller's clock of uses), so they measure
  // recent demand.
  void Get(uint32_t table, std::span<const uint64_t> ids, size_t row_bytes, char* out,
           std::vector<uint8_t>* found, bool count_uses = false, uint16_t epoch = 0);
  void Put(uint32_t table, uint64_t id, const void* row, size_t row_bytes);
  // The first error of the Puts since the last Commit (a full disk).
  absl::Status Commit();
  void ForEach(uint32_t table, absl::FunctionRef<void(uint64_t id, const char* row)> fn) const;
  void Clear(uint32_t table);
  uint64_t disk_bytes() const;
  // RAM of the id -> slot index of `table`, and its use counts; when they
  // are close to growing, with the larger arrays they grow into (both are
  // alive while the entries move), so that a budget holding index_bytes
  // holds the growth too.
  uint64_t index_bytes(uint32_t table) const;

 private:
  struct File {
    int fd = -1;
    char* map = nullptr;      // the reserved address range
    size_t row_bytes = 0;
    uint64_t slots = 0;       // used
    uint64_t capacity = 0;    // allocated on disk
    // id -> slot (12 bytes a slot at a load of 0.53-0.8: 15-22.5 bytes an
    // id, on huge pages), and each slot's recent uses: a u16 count and the
    // u16 epoch of its last counted use.
    RowIndex slot_of;
    std::vector<uint32_t, HugePageAllocator<uint32_t>> uses;
  };

  explicit SlotStore(std::string path) : path_(std::move(path)) {}
  absl::StatusOr<File*> FileOf(uint32_t table, size_t row_bytes);
  absl::Status Grow(uint32_t table, File* f);
  char* Slot(const File& f, uint64_t slot) const;

  const std::string path_;
  std::vector<std::unique_ptr<File>> files_;  // by table id
  absl::Status pending_;
  std::vector<const char*> sources_;  // Get's scratch
};

}  // namespace pstrain::server
