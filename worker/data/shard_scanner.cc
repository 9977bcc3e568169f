#include "worker/data/shard_scanner.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"

namespace pstrain::worker {

absl::StatusOr<std::unique_ptr<ShardScanner>> ShardScanner::Create(
    std::vector<InputFile> files, std::vector<FileRange> ranges, const ScannerOptions& options) {
  PS_ASSIGN_OR_RETURN(CriteoParser parser, CriteoParser::Create(options.schema));
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
                           const ScannerOptions& options, CriteoParser parser)
    : files_(std::move(files)),
      ranges_(std::move(ranges)),
      options_(options),
      parser_(std::move(parser)),
      reader_(options.io_buffer_bytes, options.schema.max_line_bytes) {}

void ShardScanner::Rewind() {
  reader_.Close();
  reader_open_ = false;
  next_range_ = 0;
}

absl::StatusOr<bool> ShardScanner::NextRow(ParsedRow* row) {
  LineReader::Line line;
  while (true) {
    if (!reader_open_) {
      if (next_range_ == ranges_.size()) {
        PS_RETURN_IF_ERROR(CheckBadFraction());
        return false;
      }
      const FileRange& r = ranges_[next_range_++];
      const InputFile& f = files_[r.file];
      PS_RETURN_IF_ERROR(reader_.Open(f, r.begin, r.end));
      reader_open_ = true;
    }
    PS_ASSIGN_OR_RETURN(bool more, reader_.Next(&line));
    if (!more) {
      reader_.Close();
      reader_open_ = false;
      continue;
    }
    std::string_view text = line.text;
    if (line.offset == 0 && options_.schema.header) {
      // A header, neither good nor bad; one that does not match is an error.
      absl::Status s = line.overlong ? absl::InvalidArgumentError("the header is too long")
                                     : parser_.CheckHeader(text);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(reader_.path(), ":1: ", s.message()));
      continue;
    }
    if (!line.overlong && (text.empty() || (text.size() == 1 && text[0] == '\r'))) {
      continue;  // blank lines are neither good nor bad
    }
    absl::Status s =
        line.overlong
            ? absl::InvalidArgumentError(absl::StrCat("line longer than max_line_bytes ",
                                                      options_.schema.max_line_bytes))
            : parser_.Parse(text, row);
    if (s.ok()) {
      ++good_;
      if (good_ + bad_ == kMinLinesForBadFraction) PS_RETURN_IF_ERROR(CheckBadFraction());
      return true;
    }
    PS_RETURN_IF_ERROR(OnBadLine(line, s));
  }
}

std::string ShardScanner::Where(const LineReader::Line& line) {
  absl::StatusOr<int64_t> n = reader_.LineNumber(line);
  if (n.ok()) return absl::StrCat(reader_.path(), ":", *n);
  return absl::StrCat(reader_.path(), " at byte ", line.offset);
}

absl::Status ShardScanner::OnBadLine(const LineReader::Line& line, const absl::Status& why) {
  ++bad_;
  const bool log = logged_ < options_.max_logged_bad_lines;
  const int64_t total = good_ + bad_;
  const bool fails = total >= kMinLinesForBadFraction &&
                     static_cast<double>(bad_) > options_.max_bad_lines_fraction * total;
  if (log || fails) {
    last_bad_ = absl::StrCat(Where(line), ": ", why.message());
  } else {
    last_bad_ = absl::StrCat(reader_.path(), " at byte ", line.offset, ": ", why.message());
  }
  if (log) {
    ++logged_;
    spdlog::warn("skipping bad line {}{}", last_bad_,
                 logged_ == options_.max_logged_bad_lines ? " (further bad lines not logged)"
                                                          : "");
  }
  return fails ? CheckBadFraction() : absl::OkStatus();
}

absl::Status ShardScanner::CheckBadFraction() const {
  const int64_t total = good_ + bad_;
  if (bad_ == 0 || static_cast<double>(bad_) <= options_.max_bad_lines_fraction * total) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "too many bad lines: %d of %d (%.2f%%) exceed max_bad_lines_fraction %g; latest: %s", bad_,
      total, 100.0 * bad_ / total, options_.max_bad_lines_fraction, last_bad_));
}

}  // namespace pstrain::worker
