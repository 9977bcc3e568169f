// RowSource: the rows of one shard of the input, pass after pass, in a
// ShardScanner's order, for the DataReader (reader.h) to batch. With
// reader_threads 1 one scanner runs on the calling thread; with N > 1 the
// shard is cut into work units (~8 MiB of text, a Parquet row group, a
// compressed file) that N threads decode while the rows still come out in
// unit order, so that the batches are the same whatever N is.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "data/batch_builder.h"
#include "data/file_set.h"
#include "data/parser.h"
#include "data/reader.h"

namespace pstrain::worker {

// The rows of one shard, pass after pass, in a ShardScanner's order.
class RowSource {
 public:
  virtual ~RowSource() = default;
  // Starts a new pass. REQUIRES: the previous one (if any) ended.
  virtual void Rewind() = 0;
  // As ShardScanner::NextRow.
  virtual absl::StatusOr<bool> NextRow(ParsedRow* row) = 0;
  // As ShardScanner::AppendRows: the same rows, into `builder` (a pass is
  // read with one of the two).
  virtual absl::StatusOr<RowsAppended> AppendRows(BatchBuilder* builder, int64_t max_rows) = 0;
  virtual int64_t good_lines() const = 0;
  virtual int64_t bad_lines() const = 0;
  virtual uint64_t bytes_read() const = 0;
  // As ShardScanner::Position and SeekTo, where the source reads its rows in
  // file order on one thread; unknown, and Unimplemented, otherwise.
  virtual SourcePosition Position() const { return {}; }
  virtual absl::Status SeekTo(const SourcePosition& /*at*/) {
    return absl::UnimplementedError("this reader cannot start mid-shard (it reads on several threads)");
  }
};

// The rows of the shard of `files` that `options` name (its shard_index,
// num_shards, reader_threads, ...). `stop`, when set, makes the decoding
// threads of reader_threads > 1 stop promptly (the reader's destruction).
absl::StatusOr<std::unique_ptr<RowSource>> MakeSource(const ReaderOptions& options,
                                                      std::vector<InputFile> files,
                                                      const std::atomic<bool>* stop);

}  // namespace pstrain::worker
