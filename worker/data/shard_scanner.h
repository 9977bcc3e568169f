// ShardScanner: the synchronous core of the data readers. Walks the file
// ranges of one shard (see file_set.h), splits them into lines, parses the
// lines and hands out good rows; bad lines are skipped, counted, the first
// few logged with file and line number, and too many of them end the scan
// with an error. Owned and used by one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/data/criteo_parser.h"
#include "worker/data/file_set.h"
#include "worker/data/line_reader.h"

namespace pstrain::worker {

struct ScannerOptions {
  Schema schema;
  // Fails once bad / (good + bad) exceeds this, checked whenever a bad line
  // is seen after at least kMinLinesForBadFraction lines, and at the end
  // of every pass.
  double max_bad_lines_fraction = 0.01;
  size_t io_buffer_bytes = size_t{4} << 20;
  int max_logged_bad_lines = 5;
};

class ShardScanner {
 public:
  static constexpr int64_t kMinLinesForBadFraction = 1000;

  // InvalidArgument for a bad schema or fraction. Opens no file yet.
  static absl::StatusOr<std::unique_ptr<ShardScanner>> Create(std::vector<InputFile> files,
                                                              std::vector<FileRange> ranges,
                                                              const ScannerOptions& options);

  // Starts a new pass from the first range. Counters keep accumulating.
  void Rewind();

  // Fills `*row` with the next good row and returns true; returns false at
  // the end of the pass. Errors: I/O (from the file system), DataLoss for
  // corrupt or truncated compressed data (naming the file) and
  // InvalidArgument when the bad-line fraction is exceeded (naming the file
  // and line of the latest bad line).
  absl::StatusOr<bool> NextRow(ParsedRow* row);

  // Totals over all passes so far.
  int64_t good_lines() const { return good_; }
  int64_t bad_lines() const { return bad_; }
  uint64_t bytes_read() const { return reader_.bytes_read(); }
  const Schema& schema() const { return parser_.schema(); }

 private:
  ShardScanner(std::vector<InputFile> files, std::vector<FileRange> ranges,
               const ScannerOptions& options, CriteoParser parser);

  absl::Status OnBadLine(const LineReader::Line& line, const absl::Status& why);
  absl::Status CheckBadFraction() const;
  std::string Where(const LineReader::Line& line);

  const std::vector<InputFile> files_;
  const std::vector<FileRange> ranges_;
  const ScannerOptions options_;
  const CriteoParser parser_;
  LineReader reader_;
  size_t next_range_ = 0;
  bool reader_open_ = false;
  int64_t good_ = 0;
  int64_t bad_ = 0;
  int logged_ = 0;
  std::string last_bad_;  // "file:line: reason" of the latest bad line
};

}  // namespace pstrain::worker
