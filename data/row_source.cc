#include "data/row_source.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/hash.h"
#include "common/status.h"
#include "data/batch_builder.h"
#include "data/file_set.h"
#include "data/shard_scanner.h"
#include "data/shuffle_buffer.h"

namespace pstrain::worker {
namespace {

// True the first time shard `shard` of `shards` is seen in this process: a
// worker opens its shard again each epoch, and the lead opens others'
// evaluation shards each round, but a shard without data is worth one line.
bool FirstTimeFor(int shard, int shards) {
  static absl::Mutex mu(absl::kConstInit);
  static std::set<std::pair<int, int>>* seen = new std::set<std::pair<int, int>>();
  absl::MutexLock lock(&mu);
  return seen->emplace(shard, shards).second;
}

// reader_threads 1: one scanner on the calling thread.
class SerialSource final : public RowSource {
 public:
  explicit SerialSource(std::unique_ptr<ShardScanner> scanner) : scanner_(std::move(scanner)) {}
  void Rewind() override { scanner_->Rewind(); }
  absl::StatusOr<bool> NextRow(ParsedRow* row) override { return scanner_->NextRow(row); }
  absl::StatusOr<RowsAppended> AppendRows(BatchBuilder* builder, int64_t max_rows) override {
    return scanner_->AppendRows(builder, max_rows);
  }
  int64_t good_lines() const override { return scanner_->good_lines(); }
  int64_t bad_lines() const override { return scanner_->bad_lines(); }
  uint64_t bytes_read() const override { return scanner_->bytes_read(); }
  SourcePosition Position() const override { return scanner_->Position(); }
  absl::Status SeekTo(const SourcePosition& at) override { return scanner_->SeekTo(at); }

 private:
  std::unique_ptr<ShardScanner> scanner_;
};

constexpr int kBlockRows = 4096;
constexpr int64_t kMaxUnitRows = int64_t{1} << 18;  // decoded ahead in one unit
constexpr absl::Duration kStopPoll = absl::Milliseconds(20);

// Rows in flat arrays, shaped by the schema: a block of a work unit's rows,
// handed from a decoding thread to the reader thread, which takes them in
// order. A row with one id per field (the common case) keeps no field ends.
class RowBlock {
 public:
  explicit RowBlock(const Schema& s)
      : num_dense_(static_cast<size_t>(s.num_dense)),
        num_sparse_(static_cast<size_t>(s.num_sparse)),
        num_extra_(s.extra_labels.size()) {
    constexpr size_t n = kBlockRows;
    labels_.reserve(n);
    extra_.reserve(n * num_extra_);
    dense_.reserve(n * num_dense_);
    ids_.reserve(n * num_sparse_);
    ids_end_.reserve(n);
    for (size_t f = 0; f < num_sparse_; ++f) one_id_ends_.push_back(static_cast<uint32_t>(f + 1));
  }

  int rows() const { return static_cast<int>(labels_.size()); }
  void Clear() {
    labels_.clear();
    extra_.clear();
    dense_.clear();
    ids_.clear();
    ids_end_.clear();
    field_end_.clear();
    next_field_end_ = 0;
  }
  void Add(const ParsedRow& row) {
    labels_.push_back(row.label);
    extra_.insert(extra_.end(), row.extra_labels.data(), row.extra_labels.data() + num_extra_);
    dense_.insert(dense_.end(), row.dense.data(), row.dense.data() + num_dense_);
    const size_t ids = num_sparse_ == 0 ? 0 : row.field_end[num_sparse_ - 1];
    ids_.insert(ids_.end(), row.ids.data(), row.ids.data() + ids);
    ids_end_.push_back(static_cast<uint32_t>(ids_.size()));
    if (ids != num_sparse_) {  // some field has several ids
      field_end_.insert(field_end_.end(), row.field_end.data(), row.field_end.data() + num_sparse_);
    }
  }
  // Appends row r to `builder` (Next()'s row, without a ParsedRow): false,
  // appending nothing, when the builder refuses it. Rows in order, as Next.
  bool AppendTo(int r, BatchBuilder* builder) {
    const size_t i = static_cast<size_t>(r);
    const uint32_t first = i == 0 ? 0 : ids_end_[i - 1];
    const bool one_id = ids_end_[i] - first == num_sparse_;
    const uint32_t* field_end = one_id ? one_id_ends_.data() : field_end_.data() + next_field_end_;
    if (!builder->Append(labels_[i], dense_.data() + i * num_dense_, ids_.data() + first, field_end,
                         extra_.data() + i * num_extra_)) {
      return false;
    }
    if (!one_id) next_field_end_ += num_sparse_;
    return true;
  }
  // The next row, in order from the first, as the scanner gave it (the
  // parts a batch takes).
  void Next(int r, ParsedRow* row) {
    const size_t i = static_cast<size_t>(r);
    row->label = labels_[i];
    row->extra_labels.assign(extra_.begin() + i * num_extra_, extra_.begin() + (i + 1) * num_extra_);
    row->dense.assign(dense_.begin() + i * num_dense_, dense_.begin() + (i + 1) * num_dense_);
    const uint32_t first = i == 0 ? 0 : ids_end_[i - 1];
    row->ids.assign(ids_.begin() + first, ids_.begin() + ids_end_[i]);
    row->field_end.resize(num_sparse_);
    if (ids_end_[i] - first == num_sparse_) {
      for (size_t f = 0; f < num_sparse_; ++f) row->field_end[f] = static_cast<uint32_t>(f + 1);
    } else {
      std::copy_n(field_end_.begin() + next_field_end_, num_sparse_, row->field_end.begin());
      next_field_end_ += num_sparse_;
    }
  }

 private:
  const size_t num_dense_, num_sparse_, num_extra_;
  std::vector<float> labels_, extra_, dense_;
  std::vector<uint64_t> ids_;
  std::vector<uint32_t> ids_end_;    // [rows]: the end of each row's ids
  std::vector<uint32_t> field_end_;  // the field ends of the rows with several ids a field
  std::vector<uint32_t> one_id_ends_;  // [num_sparse]: 1, 2, ... (a row with one id a field)
  size_t next_field_end_ = 0;        // Next()'s place in field_end_
};

// reader_threads N > 1: the shard's work units (WorkUnits) decoded by N
// threads, each with its own scanner, into blocks of rows; NextRow() takes
// them unit after unit, so in one scanner's order. At most 2N units are in
// flight (unit u in slot u % 2N), each holding at most kMaxUnitRows rows
// decoded ahead unless it is the one being taken. The bad-line fraction is
// judged here over the totals: when a unit with bad lines ends (early, as
// the scanner does, when the rest is large) and at the end of each pass.
// Rewind() and NextRow() are for one thread (the reader thread).
class ParallelScanner final : public RowSource {
 public:
  // Starts the threads on the first pass. NextRow() stops waiting, ending
  // the pass, once `*stop` (may be null) turns true.
  static absl::StatusOr<std::unique_ptr<RowSource>> Create(std::vector<InputFile> files,
                                                           const std::vector<FileRange>& ranges,
                                                           const ScannerOptions& options,
                                                           int threads, uint64_t unit_bytes,
                                                           const std::atomic<bool>* stop) {
    std::vector<FileRange> units = WorkUnits(files, ranges, unit_bytes);
    std::vector<std::unique_ptr<ShardScanner>> scanners;
    for (int t = 0; t < threads; ++t) {
      PS_ASSIGN_OR_RETURN(std::unique_ptr<ShardScanner> s, ShardScanner::Create(files, units, options));
      scanners.push_back(std::move(s));
    }
    std::vector<double> max_lines(units.size() + 1, 0.0);  // the most lines from unit u on
    for (size_t u = units.size(); u-- > 0;) {
      const InputFile& f = files[static_cast<size_t>(units[u].file)];
      max_lines[u] = f.parquet || f.compression != Compression::kNone
                         ? std::numeric_limits<double>::infinity()
                         : max_lines[u + 1] + static_cast<double>(units[u].end - units[u].begin) / 2 + 2;
    }
    return std::unique_ptr<RowSource>(new ParallelScanner(
        std::move(units), std::move(max_lines), options, std::move(scanners), stop));
  }

  ~ParallelScanner() override {
    {
      absl::MutexLock lock(&mu_);
      quit_ = true;
    }
    quitting_.store(true, std::memory_order_relaxed);
    for (std::thread& t : threads_) t.join();
  }

  void Rewind() override {
    if (!started_) return;  // nothing of this pass taken yet: it is the new one
    started_ = false;
    absl::MutexLock lock(&mu_);
    head_ = next_unit_ = 0;
  }

  absl::StatusOr<bool> NextRow(ParsedRow* row) override {
    started_ = true;
    while (block_ == nullptr || next_in_block_ == block_->rows()) {
      PS_ASSIGN_OR_RETURN(bool more, NextBlock());
      if (!more) return false;
    }
    block_->Next(next_in_block_++, row);
    ++good_;
    return true;
  }

  absl::StatusOr<RowsAppended> AppendRows(BatchBuilder* builder, int64_t max_rows) override {
    started_ = true;
    RowsAppended out;
    while (out.rows < max_rows) {
      if (block_ == nullptr || next_in_block_ == block_->rows()) {
        PS_ASSIGN_OR_RETURN(bool more, NextBlock());
        if (!more) {
          out.end = true;
          return out;
        }
        continue;
      }
      if (!block_->AppendTo(next_in_block_, builder)) return out;  // the batch is full
      ++next_in_block_;
      ++good_;
      ++out.rows;
    }
    return out;
  }

  int64_t good_lines() const override { return good_; }
  int64_t bad_lines() const override { return bad_; }
  uint64_t bytes_read() const override { return bytes_; }

 private:
  // A unit in flight: its blocks not yet taken, then how it ended.
  struct Slot {
    std::deque<std::unique_ptr<RowBlock>> blocks;
    int64_t rows = 0;  // in blocks
    bool done = false;
    absl::Status status;
    int64_t bad = 0;
    uint64_t bytes = 0;
    ShardScanner::BadLine latest;  // when bad > 0
  };

  ParallelScanner(std::vector<FileRange> units, std::vector<double> max_lines,
                  const ScannerOptions& options,
                  std::vector<std::unique_ptr<ShardScanner>> scanners, const std::atomic<bool>* stop)
      : schema_(options.schema),
        units_(std::move(units)),
        max_lines_from_(std::move(max_lines)),
        max_bad_fraction_(options.max_bad_lines_fraction),
        early_judgement_min_lines_(options.early_judgement_min_lines),
        stop_(stop),
        scanners_(std::move(scanners)),
        slots_(2 * scanners_.size()) {
    for (size_t t = 0; t < scanners_.size(); ++t) {
      threads_.emplace_back([this, t] {
        pthread_setname_np(pthread_self(), absl::StrCat("data-decode-", t).c_str());
        Work(*scanners_[t]);
      });
    }
  }

  std::unique_ptr<RowBlock> TakeBlock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (free_.empty()) return std::make_unique<RowBlock>(schema_);
    std::unique_ptr<RowBlock> b = std::move(free_.back());
    free_.pop_back();
    b->Clear();
    return b;
  }

  // A decoding thread: takes the next unit of the pass and decodes it into
  // its slot, until the scanner is destroyed.
  void Work(ShardScanner& scanner) {
    ParsedRow row;
    while (true) {
      size_t u;
      Slot* slot;
      std::unique_ptr<RowBlock> block;
      {
        absl::MutexLock lock(&mu_);
        const auto can_take = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return quit_ || (next_unit_ < units_.size() && next_unit_ < head_ + slots_.size());
        };
        mu_.Await(absl::Condition(&can_take));
        if (quit_) return;
        u = next_unit_++;
        slot = &slots_[u % slots_.size()];
        block = TakeBlock();
      }
      const int64_t bad_before = scanner.bad_lines();
      const uint64_t bytes_before = scanner.bytes_read();
      scanner.RewindToRange(u);
      absl::Status status;
      while (!quitting_.load(std::memory_order_relaxed)) {
        absl::StatusOr<bool> more = scanner.NextRow(&row);
        if (!more.ok()) status = more.status();
        if (!more.ok() || !*more) break;
        block->Add(row);
        if (block->rows() == kBlockRows && (block = Hand(u, slot, std::move(block))) == nullptr) {
          return;  // quitting
        }
      }
      absl::MutexLock lock(&mu_);
      slot->rows += block->rows();
      if (block->rows() > 0) {
        slot->blocks.push_back(std::move(block));
      } else {
        free_.push_back(std::move(block));
      }
      slot->done = true;
      slot->status = std::move(status);
      slot->bad = scanner.bad_lines() - bad_before;
      slot->bytes = scanner.bytes_read() - bytes_before;
      if (slot->bad > 0) slot->latest = scanner.latest_bad_line();
    }
  }

  // Hands a full block of unit `u` to its slot, waits while the slot holds
  // too many rows (unless u is being taken), and returns an empty block;
  // null when quitting.
  std::unique_ptr<RowBlock> Hand(size_t u, Slot* slot, std::unique_ptr<RowBlock> block) {
    absl::MutexLock lock(&mu_);
    slot->rows += block->rows();
    slot->blocks.push_back(std::move(block));
    const auto room = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return quit_ || u == head_ || slot->rows < kMaxUnitRows;
    };
    mu_.Await(absl::Condition(&room));
    return quit_ ? nullptr : TakeBlock();
  }

  // Makes the next block of the pass block_: true, or false at the end of
  // the pass (judged) or when stopped.
  absl::StatusOr<bool> NextBlock() {
    absl::MutexLock lock(&mu_);
    if (block_ != nullptr) free_.push_back(std::move(block_));
    while (head_ < units_.size()) {
      Slot& s = slots_[head_ % slots_.size()];
      const auto ready = [&s] { return !s.blocks.empty() || s.done; };
      if (stop_ == nullptr) {
        mu_.Await(absl::Condition(&ready));
      } else {
        while (!mu_.AwaitWithTimeout(absl::Condition(&ready), kStopPoll)) {
          if (stop_->load(std::memory_order_relaxed)) return false;
        }
      }
      if (!s.blocks.empty()) {
        block_ = std::move(s.blocks.front());
        s.blocks.pop_front();
        s.rows -= block_->rows();
        next_in_block_ = 0;
        return true;
      }
      PS_RETURN_IF_ERROR(s.status);
      const int64_t bad = s.bad;
      bad_ += s.bad;
      bytes_ += s.bytes;
      if (bad > 0) latest_ = std::move(s.latest);
      s = Slot();
      ++head_;
      const double left = max_lines_from_[head_];
      if (bad > 0 && left >= early_judgement_min_lines_) {
        PS_RETURN_IF_ERROR(
            ShardScanner::JudgeBadLines(good_, bad_, left, max_bad_fraction_, &latest_));
      }
    }
    PS_RETURN_IF_ERROR(ShardScanner::JudgeBadLines(good_, bad_, 0, max_bad_fraction_, &latest_));
    return false;
  }

  const Schema schema_;
  const std::vector<FileRange> units_;
  const std::vector<double> max_lines_from_;  // [units + 1]
  const double max_bad_fraction_;
  const double early_judgement_min_lines_;
  const std::atomic<bool>* const stop_;
  const std::vector<std::unique_ptr<ShardScanner>> scanners_;  // one per thread
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);  // [2N]
  size_t next_unit_ ABSL_GUARDED_BY(mu_) = 0;     // the next to decode in this pass
  size_t head_ ABSL_GUARDED_BY(mu_) = 0;          // the unit rows are taken from
  bool quit_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<RowBlock>> free_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> quitting_{false};  // quit_, read without the lock

  // The reader thread's.
  std::unique_ptr<RowBlock> block_;  // rows being taken
  int next_in_block_ = 0;
  bool started_ = false;  // a row of this pass was asked for
  int64_t good_ = 0, bad_ = 0;
  uint64_t bytes_ = 0;
  ShardScanner::BadLine latest_;
};

}  // namespace

// The rows of the shard of `files` that `options` name; `stop` as for
// ParallelScanner::Create.
absl::StatusOr<std::unique_ptr<RowSource>> MakeSource(const ReaderOptions& options,
                                                      std::vector<InputFile> files,
                                                      const std::atomic<bool>* stop) {
  std::vector<FileRange> ranges = ShardRanges(files, options.shard_index, options.num_shards);
  const auto is_compressed = [](const InputFile& f) { return f.compression != Compression::kNone; };
  const int compressed =
      static_cast<int>(std::count_if(files.begin(), files.end(), is_compressed));
  if (ranges.empty() && compressed > 0 && FirstTimeFor(options.shard_index, options.num_shards)) {
    // A compressed file is read whole by one shard (file_set.h).
    spdlog::warn("data shard {} of {} holds no data: {} of the {} input files are compressed and "
                 "each is read whole by one shard; split the data into more files",
                 options.shard_index, options.num_shards, compressed, files.size());
  }
  ScannerOptions so;
  so.schema = options.schema;
  so.max_bad_lines_fraction = options.max_bad_lines_fraction;
  so.io_buffer_bytes = options.io_buffer_bytes;
  if (options.reader_threads > 1) {
    // The threads share the bad lines logged (each logs its first few).
    so.max_logged_bad_lines = std::max(1, (so.max_logged_bad_lines + options.reader_threads - 1) /
                                              options.reader_threads);
    return ParallelScanner::Create(std::move(files), ranges, so, options.reader_threads,
                                   options.reader_unit_bytes, stop);
  }
  PS_ASSIGN_OR_RETURN(std::unique_ptr<ShardScanner> scanner,
                      ShardScanner::Create(std::move(files), std::move(ranges), so));
  return std::unique_ptr<RowSource>(new SerialSource(std::move(scanner)));
}


}  // namespace pstrain::worker
