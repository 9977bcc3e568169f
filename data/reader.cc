#include "data/reader.h"

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
#include "data/row_source.h"
#include "data/shard_scanner.h"
#include "data/shuffle_buffer.h"

namespace pstrain::worker {
namespace {

constexpr int kMaxBatchSize = 1 << 24;
constexpr int kMaxReaderThreads = 64;

uint64_t EpochSeed(uint64_t seed, int epoch) {
  return Mix64(seed ^ Mix64(static_cast<uint64_t>(epoch) + 0x45504f4348ULL));
}

std::unique_ptr<ShuffleBuffer> MakeShuffle(const ReaderOptions& options) {
  if (options.shuffle_buffer_rows == 0) return nullptr;
  return std::make_unique<ShuffleBuffer>(options.shuffle_buffer_rows, options.schema.num_dense,
                                         options.schema.num_sparse,
                                         !AnyMultiHot(options.schema),
                                         static_cast<int>(options.schema.extra_labels.size()));
}

// Adds `row` (or a shuffled row) to `builder`; when the builder refuses it
// (batch limits), `flush` empties it first. Returns false when flush says
// to stop.
template <typename Flush>
bool AddRow(const ParsedRow& row, ShuffleBuffer* shuffle, BatchBuilder* builder, Flush&& flush) {
  if (shuffle == nullptr) {
    if (builder->Append(row)) return true;
    if (!flush()) return false;
    return builder->Append(row);
  }
  if (shuffle->full() && !shuffle->PopRandomInto(builder)) {
    if (!flush()) return false;
    shuffle->PopRandomInto(builder);
  }
  shuffle->Insert(row);
  return true;
}

}  // namespace

absl::Status ValidateReaderOptions(const ReaderOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("reader options: ", parts...));
  };
  if (o.patterns.empty() && o.stream.dir.empty()) return bad("no input patterns");
  if (o.num_shards < 1) return bad("num_shards ", o.num_shards, " < 1");
  if (o.shard_index < 0 || o.shard_index >= o.num_shards) {
    return bad("shard_index ", o.shard_index, " outside [0, ", o.num_shards, ")");
  }
  if (o.batch_size < 1 || o.batch_size > kMaxBatchSize) {
    return bad("batch_size ", o.batch_size, " outside [1, ", kMaxBatchSize, "]");
  }
  if (o.epochs < 0) return bad("epochs ", o.epochs, " < 0");
  if (o.first_epoch < 0) return bad("first_epoch ", o.first_epoch, " < 0");
  if (!o.stream.dir.empty()) {
    if (o.epochs != 1) return bad("a stream is read once (epochs ", o.epochs, ")");
    if (!o.patterns.empty()) return bad("both a stream and file patterns");
    PS_RETURN_IF_ERROR(ValidateStreamOptions(o.stream));
  }
  if (o.prefetch_batches < 1 || o.prefetch_batches > 4096) {
    return bad("prefetch_batches ", o.prefetch_batches, " outside [1, 4096]");
  }
  if (!(o.max_bad_lines_fraction >= 0.0 && o.max_bad_lines_fraction <= 1.0)) {
    return bad("max_bad_lines_fraction ", o.max_bad_lines_fraction, " outside [0, 1]");
  }
  if (o.shuffle_buffer_rows > (size_t{1} << 28)) {
    return bad("shuffle_buffer_rows ", o.shuffle_buffer_rows, " > 2^28");
  }
  if (o.io_buffer_bytes < 4096 || o.io_buffer_bytes > (size_t{1} << 30)) {
    return bad("io_buffer_bytes ", o.io_buffer_bytes, " outside [4096, 2^30]");
  }
  if (o.reader_threads < 1 || o.reader_threads > kMaxReaderThreads) {
    return bad("reader_threads ", o.reader_threads, " outside [1, ", kMaxReaderThreads, "]");
  }
  if (o.reader_unit_bytes < 1) return bad("reader_unit_bytes 0");
  if (o.start.known() && (o.shuffle_buffer_rows > 0 || o.reader_threads > 1 || !o.stream.dir.empty())) {
    return bad("a start mid-shard needs one reader thread, no shuffle buffer and no stream");
  }
  return Annotate(ValidateSchema(o.schema), "reader options");
}

// The reader thread and the queue between it and the consumer.
class DataReader::Impl {
 public:
  explicit Impl(ReaderOptions options) : options_(std::move(options)) {
    if (!options_.stream.dir.empty()) stream_.emplace(options_.stream);
  }

  // Reads `files` (not a stream). Before Start().
  absl::Status OpenFiles(std::vector<InputFile> files) {
    PS_ASSIGN_OR_RETURN(source_, MakeSource(options_, std::move(files), &stop_flag_));
    return absl::OkStatus();
  }

  ~Impl() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    stop_flag_.store(true, std::memory_order_relaxed);
    if (thread_.joinable()) thread_.join();
  }

  void Start() {
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "data-reader");
      Run();
    });
  }

  std::string EpochName(int epoch) const {
    absl::MutexLock lock(&mu_);
    const auto e = static_cast<size_t>(epoch);
    return epoch >= 0 && e < epoch_names_.size() ? epoch_names_[e] : std::string();
  }

  absl::StatusOr<std::shared_ptr<const Batch>> Next(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    if (!error_.ok()) return error_;
    if (ended_) return nullptr;
    if (!mu_.AwaitWithTimeout(absl::Condition(this, &Impl::HasItem), timeout)) {
      return absl::DeadlineExceededError(
          absl::StrCat("no batch ready within ", absl::FormatDuration(timeout)));
    }
    Item item = std::move(queue_.front());
    queue_.pop_front();
    if (!item.status.ok()) {
      error_ = item.status;
      return error_;
    }
    if (item.batch == nullptr) {
      ended_ = true;
      return nullptr;
    }
    if (delivered_per_epoch_.size() <= static_cast<size_t>(item.epoch)) {
      delivered_per_epoch_.resize(item.epoch + 1, 0);
    }
    delivered_per_epoch_[item.epoch] += item.batch->size;
    rows_delivered_ += item.batch->size;
    ++batches_delivered_;
    last_epoch_ = item.epoch;
    return std::move(item.batch);
  }

  int last_epoch() const {
    absl::MutexLock lock(&mu_);
    return last_epoch_;
  }

  ReaderStats stats() const {
    ReaderStats s;
    s.rows = rows_.load(std::memory_order_relaxed);
    s.bad_lines = bad_lines_.load(std::memory_order_relaxed);
    s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
    s.busy_seconds = static_cast<double>(busy_ns_.load(std::memory_order_relaxed)) * 1e-9;
    s.rows_per_busy_second = s.busy_seconds > 0 ? static_cast<double>(s.rows) / s.busy_seconds : 0;
    s.epoch = epoch_.load(std::memory_order_relaxed);
    s.finished = finished_.load(std::memory_order_acquire);
    absl::MutexLock lock(&mu_);
    s.rows_delivered = rows_delivered_;
    s.batches_delivered = batches_delivered_;
    return s;
  }

  std::vector<int64_t> RowsDeliveredPerEpoch() const {
    absl::MutexLock lock(&mu_);
    return delivered_per_epoch_;
  }

 private:
  using Clock = std::chrono::steady_clock;

  // A batch, the end (null batch, OK status) or an error.
  struct Item {
    std::shared_ptr<const Batch> batch;
    int epoch = 0;
    absl::Status status;
  };

  bool HasItem() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !queue_.empty(); }
  bool CanPush() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || queue_.size() < static_cast<size_t>(options_.prefetch_batches);
  }
  bool Stopping() const { return stop_flag_.load(std::memory_order_relaxed); }

  void Run() {
    busy_since_ = Clock::now();
    absl::Status status = Produce();
    PublishCounters();
    finished_.store(true, std::memory_order_release);
    if (!Stopping()) Push(Item{nullptr, epoch_.load(), status});
  }

  // Waits for room in the queue (not counted as busy time) and enqueues.
  // Returns false when the reader is being destroyed.
  bool Push(Item item) {
    PublishCounters();
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Impl::CanPush));
    busy_since_ = Clock::now();
    if (stop_) return false;
    queue_.push_back(std::move(item));
    return true;
  }

  void PublishCounters() {
    Clock::time_point now = Clock::now();
    busy_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(now - busy_since_).count(),
                       std::memory_order_relaxed);
    busy_since_ = now;
    if (source_ == nullptr) return;
    rows_.store(base_rows_ + source_->good_lines(), std::memory_order_relaxed);
    bad_lines_.store(base_bad_ + source_->bad_lines(), std::memory_order_relaxed);
    bytes_read_.store(base_bytes_ + static_cast<int64_t>(source_->bytes_read()),
                      std::memory_order_relaxed);
  }

  // Stream mode: the source of the next partition; false when the stream
  // has ended (or the reader stops).
  absl::StatusOr<bool> NextPartition(int epoch);

  absl::Status Produce();

  const ReaderOptions options_;
  std::unique_ptr<RowSource> source_;     // reader thread only
  std::optional<PartitionStream> stream_;  // reader thread only
  // Counters of the partitions' sources before source_ (reader thread).
  int64_t base_rows_ = 0, base_bad_ = 0, base_bytes_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_flag_{false};
  Clock::time_point busy_since_;  // reader thread only

  std::atomic<int64_t> rows_{0};
  std::atomic<int64_t> bad_lines_{0};
  std::atomic<int64_t> bytes_read_{0};
  std::atomic<int64_t> busy_ns_{0};
  std::atomic<int> epoch_{0};
  std::atomic<bool> finished_{false};

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  int last_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  int64_t rows_delivered_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t batches_delivered_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> delivered_per_epoch_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> epoch_names_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<bool> DataReader::Impl::NextPartition(int epoch) {
  if (epoch == options_.first_epoch && epoch > 0) {
    PS_RETURN_IF_ERROR(stream_->SkipPartitions(epoch));
  }
  PublishCounters();  // the wait for a partition is not busy time
  PS_ASSIGN_OR_RETURN(std::optional<Partition> part, stream_->Next(stop_flag_));
  busy_since_ = Clock::now();
  if (!part.has_value()) return false;
  if (source_ != nullptr) {
    base_rows_ += source_->good_lines();
    base_bad_ += source_->bad_lines();
    base_bytes_ += static_cast<int64_t>(source_->bytes_read());
  }
  spdlog::info("stream partition {} ({} files): epoch {}", part->name, part->files.size(), epoch);
  source_.reset();  // its threads end before the next source's start
  PS_ASSIGN_OR_RETURN(source_, MakeSource(options_, std::move(part->files), &stop_flag_));
  absl::MutexLock lock(&mu_);
  if (epoch_names_.size() <= static_cast<size_t>(epoch)) epoch_names_.resize(epoch + 1);
  epoch_names_[epoch] = part->name;
  return true;
}

absl::Status DataReader::Impl::Produce() {
  const Schema& schema = options_.schema;
  BatchBuilder builder(schema.num_dense, schema.num_sparse, options_.batch_size,
                       static_cast<int>(schema.extra_labels.size()));
  std::unique_ptr<ShuffleBuffer> shuffle = MakeShuffle(options_);
  ParsedRow row;
  int epoch = options_.first_epoch;
  // Batches in file order (no shuffle) say where the reader stands after
  // them: a resume may start there (ReaderOptions::start).
  auto flush = [&] {
    return builder.empty() ||
           Push(Item{builder.Finish(shuffle == nullptr ? source_->Position() : SourcePosition{}),
                     epoch, {}});
  };
  const bool stream = stream_.has_value();
  for (; stream || options_.epochs == 0 || epoch < options_.epochs; ++epoch) {
    epoch_.store(epoch, std::memory_order_relaxed);
    if (stream) {
      PS_ASSIGN_OR_RETURN(bool more, NextPartition(epoch));
      if (!more) break;
    } else if (epoch == options_.first_epoch && options_.start.known()) {
      PS_RETURN_IF_ERROR(source_->SeekTo(options_.start));
    } else {
      source_->Rewind();
    }
    const bool seeked = !stream && epoch == options_.first_epoch && options_.start.known();
    if (shuffle != nullptr) shuffle->Reseed(EpochSeed(options_.seed, epoch));
    int64_t rows_this_epoch = 0;
    while (shuffle == nullptr) {
      // Rows straight into the batch (a Parquet file's column by column).
      if (Stopping()) return absl::OkStatus();
      const int64_t want = options_.batch_size - builder.size();
      PS_ASSIGN_OR_RETURN(RowsAppended a, source_->AppendRows(&builder, want));
      rows_this_epoch += a.rows;
      const bool full = a.rows < want && !a.end;
      if (full && builder.empty()) {
        return absl::InternalError("the reader's source appended no row to an empty batch");
      }
      if ((full || builder.size() == options_.batch_size) && !flush()) return absl::OkStatus();
      if (a.end) break;
    }
    while (shuffle != nullptr) {
      if (Stopping()) return absl::OkStatus();
      PS_ASSIGN_OR_RETURN(bool more, source_->NextRow(&row));
      if (!more) break;
      ++rows_this_epoch;
      if (!AddRow(row, shuffle.get(), &builder, flush)) return absl::OkStatus();
      if (builder.size() == options_.batch_size && !flush()) return absl::OkStatus();
    }
    while (shuffle != nullptr && !shuffle->empty()) {
      if (Stopping()) return absl::OkStatus();
      if (!shuffle->PopRandomInto(&builder) && !flush()) return absl::OkStatus();
      if (builder.size() == options_.batch_size && !flush()) return absl::OkStatus();
    }
    if (options_.drop_remainder) {
      builder.Finish();
    } else if (!flush()) {
      return absl::OkStatus();
    }
    if (!stream && options_.epochs == 0 && rows_this_epoch == 0 && !seeked) break;
  }
  return absl::OkStatus();
}

DataReader::DataReader(std::unique_ptr<Impl> impl, std::vector<std::string> files,
                       std::string inputs)
    : impl_(std::move(impl)), files_(std::move(files)), inputs_(std::move(inputs)) {}

DataReader::~DataReader() = default;

absl::StatusOr<std::unique_ptr<DataReader>> DataReader::Open(ReaderOptions options) {
  PS_RETURN_IF_ERROR(ValidateReaderOptions(options));
  std::vector<std::string> paths;
  std::string inputs;
  auto impl = std::make_unique<Impl>(options);
  if (options.stream.dir.empty()) {  // a stream's files come with its partitions
    PS_ASSIGN_OR_RETURN(std::vector<InputFile> files, ExpandFilePatterns(options.patterns));
    paths.reserve(files.size());
    for (const InputFile& f : files) paths.push_back(f.path);
    inputs = DescribeInputs(files, options.shard_index, options.num_shards);
    PS_RETURN_IF_ERROR(impl->OpenFiles(std::move(files)));
  }
  impl->Start();
  return std::unique_ptr<DataReader>(
      new DataReader(std::move(impl), std::move(paths), std::move(inputs)));
}

absl::StatusOr<std::shared_ptr<const Batch>> DataReader::Next(absl::Duration timeout) {
  return impl_->Next(timeout);
}

int DataReader::last_epoch() const { return impl_->last_epoch(); }

ReaderStats DataReader::stats() const { return impl_->stats(); }

std::vector<int64_t> DataReader::RowsDeliveredPerEpoch() const {
  return impl_->RowsDeliveredPerEpoch();
}

std::string DataReader::EpochName(int epoch) const { return impl_->EpochName(epoch); }

absl::StatusOr<std::shared_ptr<const Batch>> ReadAll(const ReaderOptions& options) {
  PS_RETURN_IF_ERROR(ValidateReaderOptions(options));
  if (!options.stream.dir.empty()) return absl::InvalidArgumentError("ReadAll: not for a stream");
  PS_ASSIGN_OR_RETURN(std::vector<InputFile> files, ExpandFilePatterns(options.patterns));
  PS_ASSIGN_OR_RETURN(std::unique_ptr<RowSource> source,
                      MakeSource(options, std::move(files), nullptr));
  BatchBuilder builder(options.schema.num_dense, options.schema.num_sparse, 0,
                       static_cast<int>(options.schema.extra_labels.size()));
  std::unique_ptr<ShuffleBuffer> shuffle = MakeShuffle(options);
  if (shuffle != nullptr) shuffle->Reseed(EpochSeed(options.seed, 0));
  auto full = [] { return false; };  // one Batch: running out of room is an error
  ParsedRow row;
  while (shuffle == nullptr) {
    // Rows straight into the one batch (a Parquet file's column by column).
    PS_ASSIGN_OR_RETURN(RowsAppended a,
                        source->AppendRows(&builder, std::numeric_limits<int64_t>::max()));
    if (a.end) break;
    return absl::ResourceExhaustedError("ReadAll: the data exceeds the limits of one Batch");
  }
  while (shuffle != nullptr) {
    PS_ASSIGN_OR_RETURN(bool more, source->NextRow(&row));
    if (!more) break;
    if (!AddRow(row, shuffle.get(), &builder, full)) {
      return absl::ResourceExhaustedError("ReadAll: the data exceeds the limits of one Batch");
    }
  }
  while (shuffle != nullptr && !shuffle->empty()) {
    if (!shuffle->PopRandomInto(&builder)) {
      return absl::ResourceExhaustedError("ReadAll: the data exceeds the limits of one Batch");
    }
  }
  return builder.Finish();
}

}  // namespace pstrain::worker
