#include "data/parquet/parquet_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "data/parquet/column_reader.h"
#include "data/parquet/compression.h"
#include "data/parquet/metadata.h"
#include "data/parquet/schema_tree.h"

namespace pstrain::parquet {
namespace {

constexpr char kMagic[] = "PAR1";
constexpr char kEncryptedMagic[] = "PARE";
// "PAR1", the footer, its 4-byte length, "PAR1".
constexpr int64_t kMinFileSize = 12;

std::string DottedPath(const std::vector<std::string>& path) {
  std::string out;
  for (const std::string& p : path) {
    if (!out.empty()) out += '.';
    out += p;
  }
  return out;
}

}  // namespace

ParquetFile::ParquetFile(std::string name, const ReadOptions& options)
    : name_(std::move(name)), options_(options) {}

ParquetFile::~ParquetFile() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<ParquetFile>> ParquetFile::Open(const std::string& path,
                                                               const ReadOptions& options) {
  std::unique_ptr<ParquetFile> file(new ParquetFile(path, options));
  file->fd_ = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) return ErrnoToStatus(errno, absl::StrCat("open ", path));
  struct stat st;
  if (fstat(file->fd_, &st) != 0) return ErrnoToStatus(errno, absl::StrCat("stat ", path));
  if (!S_ISREG(st.st_mode)) return absl::InvalidArgumentError(path + ": not a regular file");
  file->file_size_ = st.st_size;
  PS_RETURN_IF_ERROR(file->Init());
  return file;
}

absl::StatusOr<std::unique_ptr<ParquetFile>> ParquetFile::FromBuffer(std::string bytes,
                                                                     std::string name,
                                                                     const ReadOptions& options) {
  std::unique_ptr<ParquetFile> file(new ParquetFile(std::move(name), options));
  file->buffer_ = std::move(bytes);
  file->file_size_ = static_cast<int64_t>(file->buffer_.size());
  PS_RETURN_IF_ERROR(file->Init());
  return file;
}

absl::StatusOr<std::string_view> ParquetFile::ReadBytes(int64_t offset, int64_t size,
                                                        std::string* scratch) const {
  // Callers pass ranges inside the file.
  if (fd_ < 0) return std::string_view(buffer_).substr(offset, size);
  scratch->resize(static_cast<size_t>(size));
  int64_t got = 0;
  while (got < size) {
    const ssize_t r = pread(fd_, scratch->data() + got, size - got, offset + got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoToStatus(errno, absl::StrCat("read ", name_, " at byte ", offset + got));
    if (r == 0) {
      return absl::DataLossError(absl::StrCat(name_, ": file ends at byte ", offset + got,
                                              " (was it truncated while open?)"));
    }
    got += r;
  }
  return std::string_view(*scratch);
}

absl::Status ParquetFile::Init() {
  if (file_size_ < kMinFileSize) {
    return absl::DataLossError(
        absl::StrCat(name_, ": not a Parquet file (", file_size_, " bytes, fewer than 12)"));
  }
  std::string scratch;
  PS_ASSIGN_OR_RETURN(std::string_view head, ReadBytes(0, 4, &scratch));
  const bool head_ok = head == kMagic;
  PS_ASSIGN_OR_RETURN(std::string_view tail, ReadBytes(file_size_ - 8, 8, &scratch));
  if (tail.substr(4) == kEncryptedMagic) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": encrypted Parquet files are not supported"));
  }
  if (!head_ok || tail.substr(4) != kMagic) {
    return absl::DataLossError(absl::StrCat(
        name_, ": not a Parquet file (no \"PAR1\" magic at its ", head_ok ? "end" : "start", ")"));
  }
  uint32_t footer_len;
  std::memcpy(&footer_len, tail.data(), 4);
  if (footer_len > file_size_ - kMinFileSize) {
    return absl::DataLossError(absl::StrCat(name_, ": footer length ", footer_len,
                                            " is larger than the file allows (",
                                            file_size_ - kMinFileSize, " bytes)"));
  }
  const int64_t footer_start = file_size_ - 8 - footer_len;
  PS_ASSIGN_OR_RETURN(std::string_view footer, ReadBytes(footer_start, footer_len, &scratch));
  absl::StatusOr<FileMetaData> md = DecodeFileMetaData(footer);
  if (!md.ok()) return Annotate(md.status(), name_);
  if (md->encrypted) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": encrypted Parquet files are not supported"));
  }
  absl::StatusOr<std::vector<ColumnDescriptor>> columns = BuildColumnDescriptors(md->schema);
  if (!columns.ok()) return Annotate(columns.status(), absl::StrCat(name_, ": schema"));
  columns_ = *std::move(columns);
  created_by_ = md->created_by;
  return InitRowGroups(*md, footer_start);
}

// Checks each column chunk's metadata against the schema and the file, and
// keeps what ReadColumn needs.
absl::Status ParquetFile::InitRowGroups(const FileMetaData& md, int64_t data_end) {
  row_groups_.reserve(md.row_groups.size());
  for (size_t g = 0; g < md.row_groups.size(); ++g) {
    const RowGroup& rg = md.row_groups[g];
    const std::string where = absl::StrCat(name_, ": row group ", g);
    if (rg.num_rows < 0) {
      return absl::DataLossError(absl::StrCat(where, " has ", rg.num_rows, " rows"));
    }
    if (rg.columns.size() != columns_.size()) {
      return absl::DataLossError(absl::StrCat(where, " has ", rg.columns.size(),
                                              " column chunks; the schema has ", columns_.size(),
                                              " columns"));
    }
    RowGroupInfo& info = row_groups_.emplace_back();
    info.num_rows = rg.num_rows;
    if (rg.num_rows > INT64_MAX - num_rows_) {
      return absl::DataLossError(absl::StrCat(where, ": the row count overflows"));
    }
    num_rows_ += rg.num_rows;
    info.chunks.reserve(rg.columns.size());
    for (size_t c = 0; c < rg.columns.size(); ++c) {
      const ColumnChunk& chunk = rg.columns[c];
      const ColumnDescriptor& col = columns_[c];
      const std::string at = absl::StrCat(where, ", column \"", col.name, "\"");
      if (chunk.encrypted) {
        return absl::UnimplementedError(absl::StrCat(at, ": encrypted columns are not supported"));
      }
      if (chunk.has_file_path) {
        return absl::UnimplementedError(
            absl::StrCat(at, ": column chunks in other files are not supported"));
      }
      if (!chunk.has_meta_data) {
        return absl::DataLossError(absl::StrCat(at, ": column chunk without metadata"));
      }
      const ColumnMetaData& m = chunk.meta_data;
      if (m.type != static_cast<int32_t>(col.type) || DottedPath(m.path_in_schema) != col.path) {
        return absl::DataLossError(
            absl::StrCat(at, ": column chunk of ", PhysicalTypeName(m.type), " \"",
                         DottedPath(m.path_in_schema), "\" where the schema has ",
                         PhysicalTypeName(static_cast<int32_t>(col.type)), " \"", col.path, "\""));
      }
      // The chunk starts at its dictionary page when it has one (a 0
      // offset, as some writers put, means none).
      int64_t start = m.data_page_offset;
      if (m.has_dictionary_page_offset && m.dictionary_page_offset >= 4 &&
          m.dictionary_page_offset < start) {
        start = m.dictionary_page_offset;
      }
      if (start < 4 || m.total_compressed_size <= 0 || start > data_end ||
          m.total_compressed_size > data_end - start) {
        return absl::DataLossError(
            absl::StrCat(at, ": column chunk at bytes [", start, ", +", m.total_compressed_size,
                         ") is outside the file's data [4, ", data_end, ")"));
      }
      info.chunks.push_back(
          Chunk{ByteRange{start, m.total_compressed_size}, m.codec, m.num_values});
    }
  }
  return absl::OkStatus();
}

int ParquetFile::FindColumn(std::string_view name) const {
  for (size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

absl::Status ParquetFile::ReadColumn(int rg, int col, ColumnData* out) const {
  if (rg < 0 || rg >= num_row_groups() || col < 0 || col >= static_cast<int>(columns_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat(name_, ": no row group ", rg, " column ", col, " (the file has ",
                     num_row_groups(), " row groups of ", columns_.size(), " columns)"));
  }
  const ColumnDescriptor& desc = columns_[col];
  const Chunk& chunk = row_groups_[rg].chunks[col];
  const std::string at = absl::StrCat(name_, ": row group ", rg, ", column \"", desc.name, "\"");
  if (!desc.unsupported.empty()) {
    return absl::UnimplementedError(absl::StrCat(at, ": ", desc.unsupported));
  }
  if (absl::Status st = CheckCodecSupported(chunk.codec); !st.ok()) return Annotate(st, at);
  if (out->scratch == nullptr) out->scratch = std::make_unique<internal::ColumnScratch>();
  PS_ASSIGN_OR_RETURN(std::string_view bytes,
                      ReadBytes(chunk.range.offset, chunk.range.size, &out->scratch->chunk));
  ChunkInfo info;
  info.file_name = name_;
  info.row_group = rg;
  info.column = &desc;
  info.codec = chunk.codec;
  info.num_values = chunk.num_values;
  info.row_group_rows = row_groups_[rg].num_rows;
  info.file_offset = chunk.range.offset;
  return ReadColumnChunk(info, bytes, options_, out);
}

}  // namespace pstrain::parquet
