#include "worker/data/data_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "worker/data/criteo_parser.h"
#include "worker/data/file_set.h"

namespace pstrain::worker {
namespace {

// The start of `path`: at least `lines` whole lines when it has them, at
// most `limit` bytes, read in 64 KiB pieces.
absl::StatusOr<std::string> ReadHead(const std::string& path, int lines, size_t limit) {
  constexpr size_t kPiece = 64 << 10;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, path);
  std::string out;
  int newlines = 0;
  while (out.size() < limit && newlines < lines) {
    const size_t at = out.size();
    out.resize(std::min(limit, at + kPiece));
    const ssize_t n = read(fd, out.data() + at, out.size() - at);
    if (n < 0 && errno == EINTR) {
      out.resize(at);
      continue;
    }
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoToStatus(err, path);
    }
    out.resize(at + static_cast<size_t>(n));
    if (n == 0) break;
    newlines += static_cast<int>(std::count(out.begin() + at, out.end(), '\n'));
  }
  close(fd);
  return out;
}

// The name of the compression format `head` starts with, or nullptr.
const char* CompressionOf(const std::string& head) {
  if (absl::StartsWith(head, absl::string_view("\x1f\x8b", 2))) return "gzip";
  if (absl::StartsWith(head, absl::string_view("\x28\xb5\x2f\xfd", 4))) return "zstd";
  return nullptr;
}

absl::Status CheckFile(const InputFile& file, const CriteoParser& parser,
                       const DataCheckOptions& options) {
  // Whole lines up to the readers' line limit, and one byte more.
  PS_ASSIGN_OR_RETURN(std::string head, ReadHead(file.path, options.lines_to_check,
                                                 parser.schema().max_line_bytes + 1));
  if (const char* format = CompressionOf(head)) {
    return absl::InvalidArgumentError(
        absl::StrCat(file.path, " is ", format,
                     "-compressed; pstrain reads plain text: decompress it first"));
  }
  ParsedRow row;
  int checked = 0, bad = 0;
  std::string first_error;
  for (size_t start = 0; start < head.size() && checked < options.lines_to_check;) {
    size_t end = head.find('\n', start);
    if (end == std::string::npos) {
      if (head.size() < file.size) break;  // cut off by the read limit
      end = head.size();
    }
    absl::Status st = parser.Parse(std::string_view(head).substr(start, end - start), &row);
    ++checked;
    if (!st.ok()) {
      ++bad;
      if (first_error.empty()) first_error = absl::StrCat("line ", checked, ": ", st.message());
    }
    start = end + 1;
  }
  if (checked > 0 && 2 * bad > checked) {
    return absl::InvalidArgumentError(absl::StrCat(file.path, ": ", bad, " of its first ", checked,
                                                   " lines do not parse; ", first_error));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckDataFiles(const std::vector<std::string>& patterns, const Schema& schema,
                            const DataCheckOptions& options) {
  PS_ASSIGN_OR_RETURN(CriteoParser parser, CriteoParser::Create(schema));
  absl::StatusOr<std::vector<InputFile>> files = ExpandFilePatterns(patterns);
  if (!files.ok()) return Annotate(files.status(), options.flag);
  uint64_t bytes = 0;
  for (const InputFile& f : *files) {
    bytes += f.size;
    if (f.size > 0) PS_RETURN_IF_ERROR(Annotate(CheckFile(f, parser, options), options.flag));
  }
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.flag, ": no data (", files->size(), " empty file",
                     files->size() == 1 ? "" : "s", ", the first ", (*files)[0].path, ")"));
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
