// PullMemo: the row numbers a SparseTable found for its recent pulls.
//
// A worker pushes the gradients of exactly the rows it pulled, the same
// unique ids in the same order, one or two requests later. Remembering the
// pull's row numbers spares the push its own lookup of every id in the
// table's index (a cache miss each, measured at about a tenth of the
// server's time for DLRM). An entry is used only when the push's ids are
// the pull's ids, byte for byte. Its table must keep every row where it is
// until Clear(), which forgets the memo (SparseTable uses it only without
// disk tier, eviction or admission).
//
// Not thread-safe: owned by one SparseTable, used from its owner thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace pstrain::server {

class PullMemo {
 public:
  // Recent pulls remembered: two a worker (the next step's pull travels
  // before this step's push) for 8 workers on one server.
  static constexpr size_t kEntries = 16;
  // Longer pulls are not remembered (the memo stays small).
  static constexpr size_t kMaxIds = size_t{1} << 16;

  // Starts remembering a pull of `ids`; its rows come through Record() and
  // count once Commit() is called.
  void Begin(std::span<const uint64_t> ids) {
    open_ = nullptr;
    if (ids.empty() || ids.size() > kMaxIds) return;
    Entry& e = entries_[next_];
    next_ = (next_ + 1) % kEntries;
    e.valid = false;
    e.ids.assign(ids.begin(), ids.end());
    e.rows.resize(ids.size());
    open_ = &e;
  }
  // The rows of ids [begin, begin + n) of the pull begun last.
  void Record(size_t begin, const uint32_t* rows, size_t n) {
    if (open_ != nullptr) std::memcpy(open_->rows.data() + begin, rows, n * sizeof(uint32_t));
  }
  void Commit() {
    if (open_ != nullptr) open_->valid = true;
    open_ = nullptr;
  }
  // The rows of a remembered pull of exactly `ids`; null when there is none.
  const uint32_t* Find(std::span<const uint64_t> ids) const {
    if (ids.empty()) return nullptr;
    for (const Entry& e : entries_) {
      if (e.valid && e.ids.size() == ids.size() &&
          e.ids.front() == ids.front() &&
          std::memcmp(e.ids.data(), ids.data(), ids.size_bytes()) == 0) {
        return e.rows.data();
      }
    }
    return nullptr;
  }
  void Clear() {
    for (Entry& e : entries_) e = Entry{};
    open_ = nullptr;
  }
  size_t bytes() const {
    size_t b = 0;
    for (const Entry& e : entries_) {
      b += e.ids.capacity() * sizeof(uint64_t) + e.rows.capacity() * sizeof(uint32_t);
    }
    return b;
  }

 private:
  struct Entry {
    std::vector<uint64_t> ids;
    std::vector<uint32_t> rows;
    bool valid = false;
  };
  std::array<Entry, kEntries> entries_;
  size_t next_ = 0;
  Entry* open_ = nullptr;
};

}  // namespace pstrain::server
