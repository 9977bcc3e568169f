// DataReader: streams Batches from the shard of a set of text files that
// this worker owns, parsed and (optionally) shuffled on a background thread.
//
// Sharding is by byte range over the concatenation of all matched files
// (file_set.h): every shard opens the same files, reads only its part, and
// the shards together see every line exactly once. gzip and zstd files are
// decompressed on the fly, each read whole by one shard. The background thread
// reads with large buffered reads, parses into Batches and keeps at most
// `prefetch_batches` of them ready; with reader_threads > 1, more threads
// read, decompress and parse (decode) work units of the shard in parallel and
// the background thread takes their rows in order. For a given seed and
// input, the sequence of batches is deterministic, whatever reader_threads.
//
// Thread-safety: Next() is for one consumer thread at a time; stats() and
// RowsDeliveredPerEpoch() may be called from any thread. The destructor
// stops the background thread promptly (within one row's parse or one read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "data/batch.h"
#include "data/partition_stream.h"
#include "data/schema.h"

namespace pstrain::worker {

struct ReaderOptions {
  // Paths or glob(3) patterns; the union of matches is read in sorted order.
  std::vector<std::string> patterns;
  int shard_index = 0;
  int num_shards = 1;
  Schema schema;
  int batch_size = 1024;  // rows per batch, in [1, 2^24]
  // Passes over the shard; 0 repeats until the reader is destroyed (or
  // forever returns no rows when the shard is empty: then it ends).
  int epochs = 1;
  // 0: file order. N > 0: rows go through an N-row shuffle window, which is
  // drained at the end of every epoch (batches never mix two epochs).
  size_t shuffle_buffer_rows = 0;
  uint64_t seed = 1;  // of the shuffle; epoch e uses a seed derived from (seed, e)
  double max_bad_lines_fraction = 0.01;
  int prefetch_batches = 4;  // batches parsed ahead, >= 1
  // Drop the last, smaller batch of every epoch instead of returning it.
  bool drop_remainder = false;
  size_t io_buffer_bytes = size_t{4} << 20;  // size of one read(2)
  // Threads that decode the shard, in [1, 64]. 1: the background thread
  // itself. N > 1: N threads besides it, each decoding a work unit at a
  // time (about reader_unit_bytes of a plain text file, a Parquet row group,
  // a compressed file whole: shard_scanner.h's WorkUnits), at most 2N units
  // in flight (each holding at most 2^18 rows decoded ahead); their rows are
  // taken unit after unit, in the order one thread reads them, so the
  // batches are the same as with 1. Bad lines are then judged over the
  // totals when a unit ends and at the end of each pass.
  int reader_threads = 1;
  uint64_t reader_unit_bytes = uint64_t{8} << 20;  // >= 1
  // Epochs before this one are not read (a resumed reader: its position's
  // epoch); the first batch comes from epoch `first_epoch`.
  int first_epoch = 0;
  // Where in epoch `first_epoch` to start (a Batch::end of a reader of the
  // same files and options): the rows before it are not read. Unknown: the
  // epoch's start. Only a reader of one thread without a shuffle buffer
  // can start there (its batches' ends are known); others fail at the
  // first batch.
  SourcePosition start;
  // A stream of partitions (partition_stream.h) instead of `patterns`:
  // epoch k is the stream's k-th partition, read once (`epochs` must be 1,
  // meaning once); the reader waits for each to complete and ends with the
  // stream. Each partition's files are sharded like `patterns`' are.
  StreamOptions stream;
};

// A snapshot of a reader's progress.
struct ReaderStats {
  int64_t rows = 0;          // good rows parsed (taken from the decoding threads)
  int64_t bad_lines = 0;     // lines skipped as malformed
  int64_t bytes_read = 0;    // bytes read from the files
  double busy_seconds = 0;   // reader thread time spent reading and parsing (or
                             // waiting for the decoding threads), not for room
  double rows_per_busy_second = 0;
  int epoch = 0;             // 0-based epoch the reader thread is in
  int64_t rows_delivered = 0;     // rows in batches returned by Next()
  int64_t batches_delivered = 0;  // batches returned by Next()
  bool finished = false;          // the reader thread has produced everything
};

class DataReader {
 public:
  // Validates the options, expands the patterns and starts the reader
  // thread. Errors: InvalidArgument (options), NotFound (a pattern matches
  // no file), and I/O errors from stat.
  static absl::StatusOr<std::unique_ptr<DataReader>> Open(ReaderOptions options);

  ~DataReader();
  DataReader(const DataReader&) = delete;
  DataReader& operator=(const DataReader&) = delete;

  // The next batch; nullptr after the last batch of the last epoch. Errors
  // (I/O, DataLoss for corrupt compressed data, too many bad lines:
  // InvalidArgument; each naming the file) come back in order after the
  // batches read before them, then on every later call.
  // DeadlineExceeded when no batch is ready within `timeout` (the reader
  // stays usable).
  absl::StatusOr<std::shared_ptr<const Batch>> Next(
      absl::Duration timeout = absl::InfiniteDuration());

  // Epoch (0-based) of the batch last returned by Next(); -1 before.
  int last_epoch() const;

  ReaderStats stats() const;

  // Exact number of rows returned by Next() in each epoch so far.
  std::vector<int64_t> RowsDeliveredPerEpoch() const;

  // Stream mode: the name of epoch `epoch`'s partition once the reader has
  // taken it ("" before, and without a stream).
  std::string EpochName(int epoch) const;

  // The files this reader matched (whole set, not just this shard's part).
  const std::vector<std::string>& files() const { return files_; }

  // What this reader's shard is read from (file_set.h's DescribeInputs):
  // equal for two readers of the same rows in the same order. Empty for a
  // stream (its partitions come later).
  const std::string& inputs() const { return inputs_; }

 private:
  class Impl;
  DataReader(std::unique_ptr<Impl> impl, std::vector<std::string> files, std::string inputs);

  std::unique_ptr<Impl> impl_;
  std::vector<std::string> files_;
  std::string inputs_;
};

// Reads the whole shard described by `options` (one epoch; batch_size,
// prefetch_batches and drop_remainder are ignored; shuffling applies) into
// one Batch, on the calling thread (with reader_threads decoding threads
// besides it when that is above 1). For evaluation sets and tests; pair it
// with SplitBatch() to iterate in batches. Errors as for DataReader, plus
// ResourceExhausted past the limits of one Batch.
absl::StatusOr<std::shared_ptr<const Batch>> ReadAll(const ReaderOptions& options);

// The options check shared by Open() and ReadAll().
absl::Status ValidateReaderOptions(const ReaderOptions& options);

}  // namespace pstrain::worker
