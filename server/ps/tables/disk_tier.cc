#include "server/ps/tables/disk_tier.h"

#include <cstring>
#include <filesystem>
#include <fstream>

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "server/ps/tables/slot_store.h"

namespace pstrain::server {
namespace {

constexpr size_t kKeyBytes = 12;
constexpr size_t kMemtableBytes = size_t{8} << 20;
constexpr size_t kBlockCacheBytes = size_t{16} << 20;

void EncodeKey(uint32_t table, uint64_t id, char* out) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(table >> (24 - 8 * i));
  for (int i = 0; i < 8; ++i) out[4 + i] = static_cast<char>(id >> (56 - 8 * i));
}

uint64_t DecodeId(const char* key) {
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id = id << 8 | static_cast<uint8_t>(key[4 + i]);
  return id;
}

rocksdb::Options TierOptions(const std::shared_ptr<rocksdb::Cache>& cache) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.paranoid_checks = true;
  o.compression = rocksdb::kNoCompression;
  o.write_buffer_size = kMemtableBytes;
  o.max_write_buffer_number = 2;
  o.max_background_jobs = 2;
  o.max_open_files = 256;
  o.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  o.keep_log_file_num = 2;
  // A Bloom filter over the memtables' keys: most lookups are of rows
  // flushed to files, and skip the memtables' skip lists.
  o.memtable_whole_key_filtering = true;
  o.memtable_prefix_bloom_size_ratio = 0.05;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = cache;
  // Index and filter blocks stay with the open files, outside the cache (a
  // small cache holding them would evict them and read them again on every
  // lookup): about 2 bytes per row on disk.
  t.cache_index_and_filter_blocks = false;
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  t.block_size = 4 << 10;
  t.checksum = rocksdb::kXXH3;  // fast without the crc32c instruction (Debian builds portably)
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

absl::Status TierError(const std::string& path, const char* what, const rocksdb::Status& s) {
  std::string msg = absl::StrCat("disk tier ", path, ": ", what, ": ", s.ToString());
  if (s.IsIOError() || s.IsNoSpace()) return absl::ResourceExhaustedError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  return absl::InternalError(msg);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DiskTier>> DiskTier::Open(const std::string& path,
                                                         TierStore store) {
  if (store == TierStore::kSlots) {
    PS_ASSIGN_OR_RETURN(std::unique_ptr<SlotStore> slots, SlotStore::Open(path));
    return std::unique_ptr<DiskTier>(new DiskTier(path, std::move(slots)));
  }
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("disk tier ", path, ": cannot create the folder: ", ec.message()));
  }
  auto cache = rocksdb::NewLRUCache(kBlockCacheBytes);
  rocksdb::Options options = TierOptions(cache);
  // The rows of an earlier process are stale: the checkpoint holds the job's.
  rocksdb::Status s = rocksdb::DestroyDB(path, options);
  if (!s.ok()) return TierError(path, "cannot erase the earlier rows", s);
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok()) return TierError(path, "cannot open", s);
  return std::unique_ptr<DiskTier>(
      new DiskTier(path, std::unique_ptr<rocksdb::DB>(raw), std::move(cache)));
}

absl::Status DiskTier::CheckFolder(const std::string& root, int rank) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tier_dir=", root, ": cannot create the folder: ", ec.message()));
  }
  const fs::path probe = fs::path(root) / ".pstrain-write-probe";
  {
    std::ofstream f(probe);
    f << "probe\n";
    f.flush();
    if (!f) {
      return absl::FailedPreconditionError(
          absl::StrCat("--tier_dir=", root, ": cannot write in the folder"));
    }
  }
  fs::remove(probe, ec);
  for (const fs::directory_entry& e : fs::directory_iterator(root, ec)) {
    if (!e.is_directory()) continue;
    if (rank >= 0 && e.path().filename().string().rfind(absl::StrCat("server", rank, "-part"), 0) != 0) {
      continue;
    }
    if (!fs::exists(e.path() / "CURRENT")) {
      // A slot store (or nothing of ours).
      if (absl::Status s = SlotStore::Check(e.path().string()); !s.ok()) {
        return absl::DataLossError(absl::StrCat(s.message(), " (left by an earlier server); remove ",
                                                e.path().string(), " to start afresh (the rows come "
                                                "back from the job's checkpoint)"));
      }
      continue;
    }
    auto cache = rocksdb::NewLRUCache(kBlockCacheBytes);
    rocksdb::Options options = TierOptions(cache);
    options.create_if_missing = false;
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::OpenForReadOnly(options, e.path().string(), &raw);
    delete raw;
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat(
          "disk tier ", e.path().string(), " (left by an earlier server) cannot be opened: ",
          s.ToString(), "; remove the folder to start afresh (the rows come back from the "
          "job's checkpoint)"));
    }
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("--tier_dir=", root, ": cannot list the folder: ", ec.message()));
  }
  return absl::OkStatus();
}

DiskTier::DiskTier(std::string path, std::unique_ptr<rocksdb::DB> db,
                   std::shared_ptr<rocksdb::Cache> cache)
    : path_(std::move(path)),
      cache_(std::move(cache)),
      db_(std::move(db)),
      batch_(std::make_unique<rocksdb::WriteBatch>()) {}

DiskTier::DiskTier(std::string path, std::unique_ptr<SlotStore> slots)
    : path_(std::move(path)), slots_(std::move(slots)) {}

DiskTier::~DiskTier() {
  if (db_) {
    rocksdb::Status s = db_->Close();
    (void)s;  // scratch: nothing to save
  }
}

absl::Status DiskTier::Get(uint32_t table, std::span<const uint64_t> ids, size_t row_bytes,
                           char* out, std::vector<uint8_t>* found, bool count_uses,
                           uint16_t epoch) {
  if (slots_) {
    slots_->Get(table, ids, row_bytes, out, found, count_uses, epoch);
    return absl::OkStatus();
  }
  const size_t n = ids.size();
  found->assign(n, 0);
  if (n == 0) return absl::OkStatus();
  keys_.resize(n);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    keys_[i].resize(kKeyBytes);
    EncodeKey(table, ids[i], keys_[i].data());
    slices[i] = rocksdb::Slice(keys_[i]);
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  db_->MultiGet(ro, db_->DefaultColumnFamily(), n, slices.data(), values.data(), statuses.data());
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) return TierError(path_, "read failed", statuses[i]);
    if (values[i].size() != row_bytes) {
      return absl::DataLossError(absl::StrCat("disk tier ", path_, ": row ", ids[i], " of table ",
                                              table, " has ", values[i].size(), " bytes, want ",
                                              row_bytes));
    }
    std::memcpy(out + i * row_bytes, values[i].data(), row_bytes);
    (*found)[i] = kUsesUnknown;
  }
  return absl::OkStatus();
}

void DiskTier::Put(uint32_t table, uint64_t id, const void* row, size_t row_bytes) {
  if (slots_) return slots_->Put(table, id, row, row_bytes);
  char key[kKeyBytes];
  EncodeKey(table, id, key);
  batch_->Put(rocksdb::Slice(key, kKeyBytes),
              rocksdb::Slice(static_cast<const char*>(row), row_bytes));
}

absl::Status DiskTier::Commit() {
  if (slots_) return slots_->Commit();
  if (batch_->Count() == 0) return absl::OkStatus();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // scratch: the checkpoint is what survives a crash
  rocksdb::Status s = db_->Write(wo, batch_.get());
  batch_->Clear();
  if (!s.ok()) return TierError(path_, "write failed", s);
  return absl::OkStatus();
}

absl::Status DiskTier::ForEach(uint32_t table, size_t row_bytes,
                               absl::FunctionRef<void(uint64_t id, const char* row)> fn) const {
  if (slots_) {
    slots_->ForEach(table, fn);
    return absl::OkStatus();
  }
  char lo[kKeyBytes], hi[kKeyBytes];
  EncodeKey(table, 0, lo);
  EncodeKey(table + 1, 0, hi);
  rocksdb::Slice upper(hi, kKeyBytes);
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  if (table != UINT32_MAX) ro.iterate_upper_bound = &upper;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(rocksdb::Slice(lo, kKeyBytes)); it->Valid(); it->Next()) {
    const rocksdb::Slice k = it->key(), v = it->value();
    if (k.size() != kKeyBytes || std::memcmp(k.data(), lo, 4) != 0) break;
    if (v.size() != row_bytes) {
      return absl::DataLossError(absl::StrCat("disk tier ", path_, ": a row of table ", table,
                                              " has ", v.size(), " bytes, want ", row_bytes));
    }
    fn(DecodeId(k.data()), v.data());
  }
  if (!it->status().ok()) return TierError(path_, "read failed", it->status());
  return absl::OkStatus();
}

absl::Status DiskTier::Clear(uint32_t table) {
  if (slots_) {
    slots_->Clear(table);
    return absl::OkStatus();
  }
  char lo[kKeyBytes], hi[kKeyBytes];
  EncodeKey(table, 0, lo);
  EncodeKey(table + 1, 0, hi);
  batch_->Clear();
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;
  rocksdb::Status s = db_->DeleteRange(wo, db_->DefaultColumnFamily(), rocksdb::Slice(lo, kKeyBytes),
                                       rocksdb::Slice(hi, kKeyBytes));
  if (!s.ok()) return TierError(path_, "cannot delete rows", s);
  return absl::OkStatus();
}

uint64_t DiskTier::disk_bytes() const {
  if (slots_) return slots_->disk_bytes();
  uint64_t v = 0;
  db_->GetIntProperty("rocksdb.total-sst-files-size", &v);
  return v;
}

uint64_t DiskTier::index_bytes(uint32_t table) const {
  return slots_ ? slots_->index_bytes(table) : 0;
}

uint64_t DiskTier::memtable_bytes() const {
  if (slots_) return 0;
  uint64_t v = 0;
  db_->GetIntProperty("rocksdb.cur-size-all-mem-tables", &v);
  return v;
}

}  // namespace pstrain::server
