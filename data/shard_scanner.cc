#include "data/shard_scanner.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "data/bad_line.h"

namespace pstrain::worker {
namespace {

// Whether `line` (a file, range and index) is reported for the first time
// in this process. Bounded: past 10 000 lines every one counts as new.
bool FirstReport(const std::string& line) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* seen = new absl::flat_hash_set<std::string>();
  absl::MutexLock lock(&mu);
  if (seen->size() >= 10000) return true;
  return seen->insert(line).second;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardScanner>> ShardScanner::Create(
    std::vector<InputFile> files, std::vector<FileRange> ranges, const ScannerOptions& options) {
  PS_ASSIGN_OR_RETURN(std::unique_ptr<const Parser> parser, CreateParser(options.schema));
  if (!(options.max_bad_lines_fraction >= 0.0 && options.max_bad_lines_fraction <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("max_bad_lines_fraction ",
                                                   options.max_bad_lines_fraction,
                                                   " outside [0, 1]"));
  }
  for (const FileRange& r : ranges) {
    if (r.file < 0 || static_cast<size_t>(r.file) >= files.size()) {
      return absl::InvalidArgumentError(absl::StrCat("file range names file ", r.file, " of ",
                                                     files.size()));
    }
  }
  return std::unique_ptr<ShardScanner>(
      new ShardScanner(std::move(files), std::move(ranges), options, std::move(parser)));
}

ShardScanner::ShardScanner(std::vector<InputFile> files, std::vector<FileRange> ranges,
                           const ScannerOptions& options,
                           std::unique_ptr<const Parser> parser)
    : files_(std::move(files)),
      ranges_(std::move(ranges)),
      options_(options),
      parser_(std::move(parser)),
      reader_(options.io_buffer_bytes, options.schema.max_line_bytes),
      parquet_(options.schema) {
  end_range_ = ranges_.size();
  // Two bytes or more a line; a compressed file's lines are not bounded.
  max_lines_from_.assign(ranges_.size() + 1, 0.0);
  for (size_t r = ranges_.size(); r-- > 0;) {
    const FileRange& range = ranges_[r];
    max_lines_from_[r] = files_[range.file].compression != Compression::kNone ||
                                 files_[range.file].parquet
                             ? std::numeric_limits<double>::infinity()
                             : max_lines_from_[r + 1] +
                                   static_cast<double>(range.end - range.begin) / 2 + 2;
  }
}

void ShardScanner::Rewind() {
  pending_ = false;
  reader_.Close();
  parquet_.Close();
  reader_open_ = parquet_open_ = false;
  next_range_ = 0;
  end_range_ = ranges_.size();
  judge_ = true;
}

void ShardScanner::RewindToRange(size_t r) {
  Rewind();
  next_range_ = r;
  end_range_ = r + 1;
  judge_ = false;
}

SourcePosition ShardScanner::Position() const {
  SourcePosition p;
  if (reader_open_ || pending_) {  // inside a text range
    const int64_t at = pending_ ? pending_offset_ : text_next_;
    if (at < 0 || next_range_ == 0) return p;
    p.range = static_cast<int32_t>(next_range_ - 1);
    p.offset = at;
    p.file = files_[ranges_[p.range].file].path;
    return p;
  }
  p.range = static_cast<int32_t>(next_range_);
  if (parquet_open_ && parquet_.Position(&p.row_group, &p.row)) --p.range;
  if (static_cast<size_t>(p.range) < ranges_.size()) p.file = files_[ranges_[p.range].file].path;
  return p;
}

absl::Status ShardScanner::SeekTo(const SourcePosition& at) {
  Rewind();
  if (at.range < 0 || static_cast<size_t>(at.range) > ranges_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data position: range ", at.range, " of a shard of ", ranges_.size()));
  }
  next_range_ = static_cast<size_t>(at.range);
  const bool text = at.offset >= 0;
  if (!text && at.row_group < 0) return absl::OkStatus();  // the range's start
  const InputFile* f = next_range_ < ranges_.size() ? &files_[ranges_[next_range_].file] : nullptr;
  if (f == nullptr || (text ? f->parquet || f->compression != Compression::kNone : !f->parquet)) {
    return absl::InvalidArgumentError(absl::StrCat("data position: range ", at.range, " is not a ",
                                                   text ? "plain text" : "Parquet", " file's"));
  }
  PS_ASSIGN_OR_RETURN(bool opened, OpenNextRange(text ? at.offset : -1));
  if (!opened) return absl::InternalError("data position: the range did not open");
  return text ? absl::OkStatus() : parquet_.Seek(at.row_group, at.row);
}

absl::StatusOr<bool> ShardScanner::NextParquetRow(ParsedRow* row) {
  while (true) {
    PS_ASSIGN_OR_RETURN(bool more, parquet_.Next(row, &bad_why_));
    if (!more) return false;
    if (bad_why_.empty()) {
      ++good_;
      return true;
    }
    PS_RETURN_IF_ERROR(OnBadRow(bad_why_));
  }
}

absl::StatusOr<bool> ShardScanner::OpenNextRange(int64_t begin) {
  if (next_range_ == end_range_) {
    if (judge_) PS_RETURN_IF_ERROR(CheckBadFraction(0));
    return false;
  }
  const FileRange& r = ranges_[next_range_++];
  const InputFile& f = files_[r.file];
  if (f.parquet) {
    if (!options_.schema.custom || options_.schema.column_names.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          f.path, " is a Parquet file: its columns are read by name, so give a schema "
                  "file (--schema) that names them"));
    }
    PS_RETURN_IF_ERROR(parquet_.Open(f.path, r.begin, r.end));
    parquet_open_ = true;
    return true;
  }
  if (!options_.schema.partition_columns.empty()) {
    PS_ASSIGN_OR_RETURN(partition_values_, PartitionValues(f.path, options_.schema.partition_columns));
  }
  // A line's offset in the range: reading starts at that line (the byte
  // before it is the previous line's newline).
  const uint64_t from = begin >= 0 ? std::max<uint64_t>(static_cast<uint64_t>(begin), r.begin) : r.begin;
  PS_RETURN_IF_ERROR(reader_.Open(f, from, std::max(from, r.end)));
  reader_open_ = true;
  const bool plain = f.compression == Compression::kNone;
  text_next_ = plain ? static_cast<int64_t>(from) : -1;
  row_offset_ = pending_offset_ = -1;
  return true;
}

absl::StatusOr<bool> ShardScanner::NextRow(ParsedRow* row) {
  while (true) {
    if (parquet_open_) {
      PS_ASSIGN_OR_RETURN(bool got, NextParquetRow(row));
      if (got) return true;
      parquet_.Close();
      parquet_open_ = false;
    } else if (reader_open_) {
      PS_ASSIGN_OR_RETURN(bool got, NextTextRow(row));
      if (got) return true;
    } else {
      PS_ASSIGN_OR_RETURN(bool more, OpenNextRange());
      if (!more) return false;
    }
  }
}

absl::StatusOr<RowsAppended> ShardScanner::AppendRows(BatchBuilder* builder, int64_t max_rows) {
  RowsAppended out;
  while (out.rows < max_rows) {
    if (parquet_open_) {
      PS_ASSIGN_OR_RETURN(RowsAppended a,
                          parquet_.AppendRows(builder, max_rows - out.rows, &bad_why_));
      good_ += a.rows;
      out.rows += a.rows;
      if (!bad_why_.empty()) {
        PS_RETURN_IF_ERROR(OnBadRow(bad_why_));
      } else if (a.end) {
        parquet_.Close();
        parquet_open_ = false;
      } else if (a.rows == 0) {
        return out;  // the batch is full
      }
    } else if (reader_open_ || pending_) {
      if (!pending_) {
        PS_ASSIGN_OR_RETURN(bool got, NextTextRow(&row_));
        if (!got) continue;
      }
      pending_ = !builder->Append(row_);
      if (pending_) {  // the batch is full
        pending_offset_ = row_offset_;
        return out;
      }
      ++out.rows;
    } else {
      PS_ASSIGN_OR_RETURN(bool more, OpenNextRange());
      if (!more) {
        out.end = true;
        return out;
      }
    }
  }
  return out;
}

absl::StatusOr<bool> ShardScanner::NextTextRow(ParsedRow* row) {
  LineReader::Line line;
  while (true) {
    PS_ASSIGN_OR_RETURN(bool more, reader_.Next(&line));
    if (!more) {
      reader_.Close();
      reader_open_ = false;
      return false;
    }
    std::string_view text = line.text;
    // Where the next line starts (known in a plain file, while no line was
    // too long to measure).
    const bool plain = text_next_ >= 0 && !line.overlong;
    text_next_ = plain ? static_cast<int64_t>(line.offset + text.size() + 1) : -1;
    row_offset_ = plain ? static_cast<int64_t>(line.offset) : -1;
    if (line.offset == 0 && options_.schema.header) {
      // A header, neither good nor bad; one that does not match is an error.
      absl::Status s = line.overlong ? absl::InvalidArgumentError("the header is too long")
                                     : parser_->CheckHeader(text);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ":1: ", s.message()));
      continue;
    }
    if (!line.overlong && (text.empty() || (text.size() == 1 && text[0] == '\r'))) {
      continue;  // blank lines are neither good nor bad
    }
    row->partition = options_.schema.partition_columns.empty() ? nullptr : &partition_values_;
    absl::Status s =
        line.overlong
            ? absl::InvalidArgumentError(absl::StrCat("line longer than max_line_bytes ",
                                                      options_.schema.max_line_bytes))
            : parser_->Parse(text, row);
    if (s.ok()) {
      ++good_;
      return true;
    }
    PS_RETURN_IF_ERROR(OnBadLine(line, s));
  }
}

std::string ShardScanner::Describe(BadLine* bad) {
  if (!bad->where.empty()) return absl::StrCat(bad->where, ": ", bad->reason);
  if (bad->number == 0) {
    absl::StatusOr<int64_t> before = LinesBefore(bad->path, bad->first_line_offset);
    if (before.ok()) bad->number = *before + bad->index + 1;
  }
  const std::string where = bad->number > 0
                                ? absl::StrCat(bad->path, ":", bad->number)
                                : absl::StrCat(bad->path, " (line ", bad->index + 1,
                                               " of the range at byte ", bad->first_line_offset, ")");
  return BadLineMessage(where, bad->reason, bad->text);
}

absl::Status ShardScanner::OnBadLine(const LineReader::Line& line, const absl::Status& why) {
  ++bad_;
  // Assigned in place: a run of bad lines allocates nothing.
  latest_.path.assign(reader_.path());
  latest_.first_line_offset = reader_.first_line_offset();
  latest_.index = line.index;
  latest_.number = 0;
  latest_.reason.assign(why.message().data(), why.message().size());
  latest_.where.clear();
  // Enough bytes for the quote's characters, and one more to show the cut.
  const std::string_view text = line.text.substr(0, 4 * kQuotedLineChars + 1);
  latest_.text.assign(text.data(), text.size());
  if (logged_ < options_.max_logged_bad_lines) {
    ++logged_;
    if (absl::StatusOr<int64_t> n = reader_.LineNumber(line); n.ok()) latest_.number = *n;
    // Epochs and evaluation rounds read the same lines again: a line is
    // warned about once in a process, later again only at debug level.
    const bool first = FirstReport(
        absl::StrCat(latest_.path, "@", latest_.first_line_offset, "#", latest_.index));
    spdlog::log(first ? spdlog::level::warn : spdlog::level::debug, "skipping bad line {}{}",
                Describe(&latest_),
                logged_ == options_.max_logged_bad_lines ? " (further bad lines not logged)" : "");
  }
  const double left = MaxLinesLeft();
  return judge_ && left >= options_.early_judgement_min_lines ? CheckBadFraction(left)
                                                              : absl::OkStatus();
}

absl::Status ShardScanner::OnBadRow(const std::string& why) {
  ++bad_;
  latest_.where = parquet_.Where();
  latest_.reason = why;
  latest_.text.clear();
  if (logged_ < options_.max_logged_bad_lines) {
    ++logged_;
    const bool first = FirstReport(latest_.where);
    spdlog::log(first ? spdlog::level::warn : spdlog::level::debug, "skipping bad row {}{}",
                Describe(&latest_),
                logged_ == options_.max_logged_bad_lines ? " (further bad rows not logged)" : "");
  }
  const double left = MaxLinesLeft();
  return judge_ && left >= options_.early_judgement_min_lines ? CheckBadFraction(left)
                                                              : absl::OkStatus();
}

double ShardScanner::MaxLinesLeft() const {
  const double in_range = reader_open_    ? static_cast<double>(reader_.MaxLinesLeft())
                          : parquet_open_ ? static_cast<double>(parquet_.RowsLeft())
                                          : 0.0;
  return in_range + max_lines_from_[next_range_];
}

absl::Status ShardScanner::CheckBadFraction(double lines_left) {
  return JudgeBadLines(good_, bad_, lines_left, options_.max_bad_lines_fraction, &latest_);
}

absl::Status ShardScanner::JudgeBadLines(int64_t good, int64_t bad, double lines_left,
                                         double max_bad_lines_fraction, BadLine* latest) {
  const int64_t total = good + bad;
  const double limit = max_bad_lines_fraction;
  if (bad == 0 || static_cast<double>(bad) <= limit * (static_cast<double>(total) + lines_left)) {
    return absl::OkStatus();
  }
  if (lines_left > 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "too many bad lines: %d of the %d lines read so far (%.2f%%), more than "
        "max_bad_lines_fraction %g of all the lines the rest could hold; the latest: %s",
        bad, total, 100.0 * bad / total, limit, Describe(latest)));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "too many bad lines: %d of %d (%.2f%%) exceed max_bad_lines_fraction %g; the latest: %s",
      bad, total, 100.0 * bad / total, limit, Describe(latest)));
}

std::vector<FileRange> WorkUnits(const std::vector<InputFile>& files,
                                 const std::vector<FileRange>& ranges, uint64_t unit_bytes) {
  std::vector<FileRange> units;
  for (const FileRange& r : ranges) {
    const InputFile& f = files[static_cast<size_t>(r.file)];
    std::vector<uint64_t> cuts;  // the units' first bytes after r.begin
    if (f.parquet) {
      absl::StatusOr<std::vector<uint64_t>> starts = ParquetRows::RowGroupStarts(f.path);
      if (starts.ok()) {
        for (uint64_t s : *starts) {
          if (s >= r.begin && s < r.end) cuts.push_back(s);
        }
        std::sort(cuts.begin(), cuts.end());
        if (!cuts.empty()) cuts.erase(cuts.begin());  // the first row group's unit starts at r.begin
      }
    } else if (f.compression == Compression::kNone && unit_bytes > 0) {
      const uint64_t pieces = std::max<uint64_t>(1, (r.end - r.begin) / unit_bytes);
      for (uint64_t k = 1; k < pieces; ++k) {
        cuts.push_back(r.begin + (r.end - r.begin) / pieces * k);
      }
    }
    uint64_t begin = r.begin;
    for (uint64_t c : cuts) {
      units.push_back(FileRange{r.file, begin, c});
      begin = c;
    }
    units.push_back(FileRange{r.file, begin, r.end});
  }
  return units;
}

}  // namespace pstrain::worker
