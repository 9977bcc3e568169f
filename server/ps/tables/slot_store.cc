#include "server/ps/tables/slot_store.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::server {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'T', 'R', 'S', 'L', 'O', 'T'};
constexpr size_t kHeaderBytes = 4096;
// Address space reserved per table file; the file itself grows in steps.
constexpr size_t kReservedBytes = size_t{1} << 38;  // 256 GiB
constexpr uint64_t kMinGrowSlots = 1 << 16;
// A slot: the row's id, then its bytes.
constexpr size_t kIdBytes = sizeof(uint64_t);

std::string FileName(const std::string& dir, uint32_t table) {
  return absl::StrCat(dir, "/table", table, ".slots");
}

struct Header {
  char magic[8];
  uint32_t table;
  uint32_t row_bytes;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SlotStore>> SlotStore::Open(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  std::filesystem::create_directories(path, ec);
  if (ec) return absl::InternalError(absl::StrCat("disk tier ", path, ": ", ec.message()));
  return std::unique_ptr<SlotStore>(new SlotStore(path));
}

absl::Status SlotStore::Check(const std::string& path) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
    const std::string name = e.path().string();
    if (e.path().extension() != ".slots") continue;
    int fd = open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoToStatus(errno, absl::StrCat("disk tier file ", name));
    Header h{};
    const ssize_t n = pread(fd, &h, sizeof(h), 0);
    close(fd);
    if (n != static_cast<ssize_t>(sizeof(h)) || std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 ||
        h.row_bytes == 0) {
      return absl::DataLossError(
          absl::StrCat("disk tier file ", name, " has no valid header (damaged, or not a tier file)"));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("disk tier ", path, ": ", ec.message()));
  return absl::OkStatus();
}

SlotStore::~SlotStore() {
  for (auto& f : files_) {
    if (!f) continue;
    if (f->map != nullptr) munmap(f->map, kReservedBytes);
    if (f->fd >= 0) close(f->fd);
  }
}

char* SlotStore::Slot(const File& f, uint64_t slot) const {
  return f.map + kHeaderBytes + slot * (kIdBytes + f.row_bytes);
}

absl::StatusOr<SlotStore::File*> SlotStore::FileOf(uint32_t table, size_t row_bytes) {
  if (table < files_.size() && files_[table]) {
    File* f = files_[table].get();
    if (f->row_bytes != row_bytes) {
      return absl::InternalError(absl::StrCat("disk tier ", path_, ": table ", table, " rows of ",
                                              row_bytes, " bytes, stored ", f->row_bytes));
    }
    return f;
  }
  if (table >= files_.size()) files_.resize(table + 1);
  auto f = std::make_unique<File>();
  const std::string name = FileName(path_, table);
  f->fd = open(name.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f->fd < 0) return ErrnoToStatus(errno, absl::StrCat("disk tier ", name));
  f->row_bytes = row_bytes;
  if (int rc = posix_fallocate(f->fd, 0, kHeaderBytes); rc != 0) {
    return ErrnoToStatus(rc, absl::StrCat("disk tier ", name));
  }
  void* map = mmap(nullptr, kReservedBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                   f->fd, 0);
  if (map == MAP_FAILED) return ErrnoToStatus(errno, absl::StrCat("disk tier ", name, ": mmap"));
  f->map = static_cast<char*>(map);
  // Huge pages for the file's page cache and its mapping where the kernel
  // and file system allow (Linux 6.x ext4 and xfs): a miss is then one TLB
  // miss fewer. Advice only.
  madvise(map, kReservedBytes, MADV_HUGEPAGE);
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.table = table;
  h.row_bytes = static_cast<uint32_t>(row_bytes);
  std::memcpy(f->map, &h, sizeof(h));
  files_[table] = std::move(f);
  return files_[table].get();
}

absl::Status SlotStore::Grow(uint32_t table, File* f) {
  const uint64_t want = std::max(kMinGrowSlots, f->capacity / 2) + f->capacity;
  if (kHeaderBytes + want * (kIdBytes + f->row_bytes) > kReservedBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("disk tier ", path_, ": table ", table,
                                                     " is past ", kReservedBytes >> 30, " GiB"));
  }
  // Reserved on disk before any slot in it is written: a full disk fails
  // here, not as a SIGBUS on the mapping.
  if (int rc = posix_fallocate(f->fd, 0, static_cast<off_t>(kHeaderBytes + want * (kIdBytes + f->row_bytes)));
      rc != 0) {
    return ErrnoToStatus(rc, absl::StrCat("disk tier ", FileName(path_, table)));
  }
  f->capacity = want;
  return absl::OkStatus();
}

void SlotStore::Get(uint32_t table, std::span<const uint64_t> ids, size_t row_bytes, char* out,
                    std::vector<uint8_t>* found, bool count_uses, uint16_t epoch) {
  found->assign(ids.size(), 0);
  if (table >= files_.size() || !files_[table] || files_[table]->row_bytes != row_bytes) return;
  File& f = *files_[table];
  // Two passes, each with its loads prefetched ahead: the index entries,
  // then the slots, so that the cache misses of many rows overlap.
  constexpr size_t kAhead = 8;
  const size_t n = ids.size();
  sources_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n) f.slot_of.Prefetch(ids[i + kAhead]);
    const uint32_t slot = f.slot_of.Find(ids[i]);
    if (slot == RowIndex::kNoRow) {
      sources_[i] = nullptr;
      continue;
    }
    sources_[i] = Slot(f, slot) + kIdBytes;
    __builtin_prefetch(sources_[i]);
    uint16_t uses = static_cast<uint16_t>(f.uses[slot]);
    if (count_uses) {
      const uint16_t last = static_cast<uint16_t>(f.uses[slot] >> 16);
      const uint16_t age = static_cast<uint16_t>(epoch - last);
      uses = age >= 16 ? 0 : static_cast<uint16_t>(uses >> age);
      if (uses < UINT16_MAX) ++uses;
      f.uses[slot] = uint32_t{epoch} << 16 | uses;
    }
    (*found)[i] = static_cast<uint8_t>(1 + std::min<uint16_t>(uses, 254));
  }
  for (size_t i = 0; i < n; ++i) {
    if (sources_[i] != nullptr) std::memcpy(out + i * row_bytes, sources_[i], row_bytes);
  }
}

void SlotStore::Put(uint32_t table, uint64_t id, const void* row, size_t row_bytes) {
  if (!pending_.ok()) return;  // the batch failed already
  absl::StatusOr<File*> file = FileOf(table, row_bytes);
  if (!file.ok()) {
    pending_ = file.status();
    return;
  }
  File* f = *file;
  uint32_t slot = f->slot_of.Find(id);
  if (slot == RowIndex::kNoRow) {
    if (f->slots == f->capacity) {
      if (absl::Status s = Grow(table, f); !s.ok()) {
        pending_ = s;
        return;
      }
    }
    slot = static_cast<uint32_t>(f->slots++);
    f->slot_of.Insert(id, slot);
    if (f->uses.size() == f->uses.capacity()) f->uses.reserve(f->uses.capacity() / 2 * 3 + 1024);
    f->uses.push_back(0);
    std::memcpy(Slot(*f, slot), &id, kIdBytes);
  }
  std::memcpy(Slot(*f, slot) + kIdBytes, row, row_bytes);
}

absl::Status SlotStore::Commit() { return std::exchange(pending_, absl::OkStatus()); }

void SlotStore::ForEach(uint32_t table, absl::FunctionRef<void(uint64_t, const char*)> fn) const {
  if (table >= files_.size() || !files_[table]) return;
  const File& f = *files_[table];
  // In slot order, each slot naming its id: the file is read front to
  // back, with no memory beyond it (the order rows first left RAM).
  for (uint64_t slot = 0; slot < f.slots; ++slot) {
    uint64_t id;
    std::memcpy(&id, Slot(f, slot), kIdBytes);
    fn(id, Slot(f, slot) + kIdBytes);
  }
}

void SlotStore::Clear(uint32_t table) {
  if (table >= files_.size() || !files_[table]) return;
  File& f = *files_[table];
  f.slot_of.Clear();
  f.uses.clear();
  f.slots = 0;  // the space stays allocated for the next rows
}

uint64_t SlotStore::disk_bytes() const {
  uint64_t bytes = 0;
  for (const auto& f : files_) {
    if (f) bytes += kHeaderBytes + f->capacity * (kIdBytes + f->row_bytes);
  }
  return bytes;
}

uint64_t SlotStore::index_bytes(uint32_t table) const {
  if (table >= files_.size() || !files_[table]) return 0;
  const File& f = *files_[table];
  // Growth is reserved from an eighth before it (a request's rows go to
  // the tier between two looks at the budget).
  const size_t soon = f.slot_of.size() / 8 + 4096;
  uint64_t bytes = f.slot_of.bytes() + f.slot_of.GrowthBytes(soon);
  bytes += f.uses.capacity() * sizeof(uint32_t);
  if (f.uses.size() + soon > f.uses.capacity()) {
    bytes += (f.uses.capacity() / 2 * 3 + 1024) * sizeof(uint32_t);
  }
  return bytes;
}

}  // namespace pstrain::server
