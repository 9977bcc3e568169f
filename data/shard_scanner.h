// ShardScanner: the synchronous core of the data readers. Walks the file
// ranges of one shard (see file_set.h), splits them into lines, parses the
// lines and hands out good rows; bad lines are skipped, counted, the first
// few logged as FILE:LINE with the line quoted (bad_line.h), and too many
// of them end the scan with an error.
//
// "Too many" is judged over the whole shard: at the end of each pass, and
// before it only when the bad lines already exceed the fraction of the most
// lines the shard could hold (each line takes two bytes or more), so a
// shard never fails for bad lines that its later good lines would dilute;
// and only when the rest is large (early_judgement_min_lines): a small rest
// is read, so that the error gives the final counts.
// Line numbers cost a count of the newlines before a range, only for the
// lines reported. Owned and used by one thread.
//
// A reader that scans one shard on several threads (reader.cc) cuts its
// ranges into work units (WorkUnits), scans each unit with a scanner of its
// thread (RewindToRange) and judges the bad-line fraction itself, over its
// totals (JudgeBadLines).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "data/batch_builder.h"
#include "data/file_set.h"
#include "data/line_reader.h"
#include "data/parquet_rows.h"
#include "data/parser.h"

namespace pstrain::worker {

struct ScannerOptions {
  Schema schema;
  // Fails once bad / (good + bad) over the shard exceeds this (see above).
  double max_bad_lines_fraction = 0.01;
  // Judged before the end of a pass only when the rest could hold this many
  // lines (64 MiB of data).
  double early_judgement_min_lines = double{1 << 25};
  size_t io_buffer_bytes = size_t{4} << 20;
  int max_logged_bad_lines = 5;
};

class ShardScanner {
 public:
  // InvalidArgument for a bad schema or fraction. Opens no file yet.
  static absl::StatusOr<std::unique_ptr<ShardScanner>> Create(std::vector<InputFile> files,
                                                              std::vector<FileRange> ranges,
                                                              const ScannerOptions& options);

  // Starts a new pass from the first range. Counters keep accumulating.
  void Rewind();
  // Starts a pass over range `r` alone: NextRow() returns false at its end,
  // and never judges the bad-line fraction (the caller does, over its
  // totals). Counters keep accumulating. REQUIRES: r < the number of ranges.
  void RewindToRange(size_t r);

  // Where the next row of the pass is (see SourcePosition): known between
  // ranges, in a Parquet range and in a plain text file's (unknown in a
  // compressed file's, and after an overlong line in its range).
  SourcePosition Position() const;
  // Starts a pass at `at` (a Position() of a pass over the same ranges): the
  // rows before it are not read. InvalidArgument when it is not one.
  absl::Status SeekTo(const SourcePosition& at);

  // Fills `*row` with the next good row and returns true; returns false at
  // the end of the pass. Errors: I/O (from the file system), DataLoss for
  // corrupt or truncated compressed data (naming the file) and
  // InvalidArgument when the bad-line fraction is exceeded (the counts, and
  // FILE:LINE, the reason and the text of the latest bad line).
  absl::StatusOr<bool> NextRow(ParsedRow* row);

  // The next good rows of the pass, at most `max_rows`, appended to
  // `builder`: a Parquet file's column by column (ParquetRows::AppendRows),
  // a text file's row by row. The same rows as NextRow() gives, with the
  // same bad-row handling and errors. `end`: the pass has ended (after the
  // rows appended). Fewer than `max_rows` rows and not `end`: the builder's
  // batch is full (a text row it refused is kept for the next call).
  // REQUIRES: a pass read either with NextRow() or with AppendRows().
  absl::StatusOr<RowsAppended> AppendRows(BatchBuilder* builder, int64_t max_rows);

  // Totals over all passes so far.
  int64_t good_lines() const { return good_; }
  int64_t bad_lines() const { return bad_; }
  uint64_t bytes_read() const { return reader_.bytes_read(); }
  const Schema& schema() const { return parser_->schema(); }

  // A bad line (or row), its number found only when it is reported.
  struct BadLine {
    std::string path;
    uint64_t first_line_offset = 0;  // of its range
    int64_t index = 0;               // in its range
    int64_t number = 0;              // 1-based in its file; 0: not found yet
    std::string reason;
    std::string text;  // cut to what a quote shows
    std::string where;  // a Parquet row's "FILE: row group G, row R" ("" for a line)
  };
  // The latest bad line of all passes (meaningless while bad_lines() is 0).
  const BadLine& latest_bad_line() const { return latest_; }

  // NextRow()'s judgement of `bad` bad lines among `good` + `bad` when the
  // rest may hold `lines_left` more lines (0 at the end of a pass): OK, or
  // its InvalidArgument quoting `*latest` (whose number it may fill in).
  static absl::Status JudgeBadLines(int64_t good, int64_t bad, double lines_left,
                                    double max_bad_lines_fraction, BadLine* latest);

 private:
  ShardScanner(std::vector<InputFile> files, std::vector<FileRange> ranges,
               const ScannerOptions& options, std::unique_ptr<const Parser> parser);

  absl::Status OnBadLine(const LineReader::Line& line, const absl::Status& why);
  absl::Status OnBadRow(const std::string& why);
  // The next row of the open Parquet range (NextRow's, for a Parquet file).
  absl::StatusOr<bool> NextParquetRow(ParsedRow* row);
  // The next good row of the open text range: false (the range closed) at
  // its end.
  absl::StatusOr<bool> NextTextRow(ParsedRow* row);
  // Opens the next range of the pass: false at the end of the pass (judged).
  // `begin`: a line's offset in it to start at, instead of the range's.
  absl::StatusOr<bool> OpenNextRange(int64_t begin = -1);
  // At the end of a pass (`lines_left` 0), or before it, when no number of
  // good lines the rest could hold brings the fraction back under the limit.
  absl::Status CheckBadFraction(double lines_left);
  // The most lines the rest of this pass may hold.
  double MaxLinesLeft() const;
  static std::string Describe(BadLine* bad);

  const std::vector<InputFile> files_;
  const std::vector<FileRange> ranges_;
  std::vector<double> max_lines_from_;  // [ranges + 1]: the most lines from range r on
  const ScannerOptions options_;
  const std::unique_ptr<const Parser> parser_;
  LineReader reader_;
  ParquetRows parquet_;
  size_t next_range_ = 0;
  size_t end_range_ = 0;  // the pass ends before this range
  bool judge_ = true;     // false: RewindToRange's pass
  bool reader_open_ = false;
  bool parquet_open_ = false;
  std::string bad_why_;  // scratch
  // The open text file's values of the schema's partition columns.
  std::vector<std::string> partition_values_;
  ParsedRow row_;         // AppendRows' text row
  bool pending_ = false;  // row_ is one the builder refused
  // The open text range's position: the offset of the line after the last
  // one read and of the last good row's line; -1 where unknown (a
  // compressed file, an overlong line).
  int64_t text_next_ = -1, row_offset_ = -1, pending_offset_ = -1;
  int64_t good_ = 0;
  int64_t bad_ = 0;
  int logged_ = 0;
  BadLine latest_;
};

// `ranges` (of `files`) cut into work units, in order, that together own
// exactly what `ranges` own (a line or row group belongs to the unit that
// holds its first byte): a plain file's range into pieces of about
// `unit_bytes`, a Parquet file's into one piece per row group it owns (its
// footer is read), a compressed file's whole. A Parquet file whose footer
// cannot be read stays whole: scanning it gives the error, in its place.
std::vector<FileRange> WorkUnits(const std::vector<InputFile>& files,
                                 const std::vector<FileRange>& ranges, uint64_t unit_bytes);

}  // namespace pstrain::worker
