#include "common/checkpoint/shard_file.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain {
namespace {

constexpr FileKind kShardFile{"PSTRCKP1", "checkpoint shard"};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kVersionWithSketches = 2;

// After the magic.
struct FileHeader {
  uint32_t version;
  uint32_t rank;
  uint32_t servers;
  uint32_t sections;
  uint64_t step;
};
static_assert(sizeof(FileHeader) == 24);

struct SectionHeader {
  uint32_t table;
  uint8_t kind;
  uint8_t pad[3];
  uint32_t dim;
  uint32_t state_floats;
  uint64_t offset;
  uint64_t count;
  uint64_t step;
  uint64_t payload_bytes;
};
static_assert(sizeof(SectionHeader) == 48);

size_t SparseRecordBytes(uint32_t dim, uint32_t state_floats) {
  return 8 + 4 + 4 * (size_t{dim} + state_floats);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardFileWriter>> ShardFileWriter::Open(const std::string& path,
                                                                       int rank, int servers,
                                                                       int sections,
                                                                       uint64_t step,
                                                                       bool with_sketches) {
  PS_ASSIGN_OR_RETURN(auto w, CheckedFileWriter::Open(path, kShardFile));
  FileHeader h{};
  h.version = with_sketches ? kVersionWithSketches : kVersion;
  h.rank = static_cast<uint32_t>(rank);
  h.servers = static_cast<uint32_t>(servers);
  h.sections = static_cast<uint32_t>(sections);
  h.step = step;
  PS_RETURN_IF_ERROR(w->Append(&h, sizeof(h)));
  return std::unique_ptr<ShardFileWriter>(
      new ShardFileWriter(std::move(w), sections, with_sketches));
}

absl::Status ShardFileWriter::AddDense(uint32_t table, uint64_t offset,
                                       std::span<const float> weights,
                                       std::span<const float> state, uint64_t step) {
  if (sections_left_-- <= 0) return absl::InternalError("more sections than announced");
  SectionHeader s{};
  s.table = table;
  s.kind = 0;
  s.state_floats = static_cast<uint32_t>(state.size());
  s.offset = offset;
  s.count = weights.size();
  s.step = step;
  s.payload_bytes = weights.size_bytes() + state.size_bytes();
  PS_RETURN_IF_ERROR(writer_->Append(&s, sizeof(s)));
  PS_RETURN_IF_ERROR(writer_->Append(weights.data(), weights.size_bytes()));
  return writer_->Append(state.data(), state.size_bytes());
}

absl::Status ShardFileWriter::AddSparse(uint32_t table, uint32_t dim, uint32_t state_floats,
                                        uint64_t rows,
                                        absl::FunctionRef<void(RowSink)> for_each_row) {
  if (sections_left_-- <= 0) return absl::InternalError("more sections than announced");
  SectionHeader s{};
  s.table = table;
  s.kind = 1;
  s.dim = dim;
  s.state_floats = state_floats;
  s.count = rows;
  s.payload_bytes = rows * SparseRecordBytes(dim, state_floats);
  PS_RETURN_IF_ERROR(writer_->Append(&s, sizeof(s)));
  // Rows are buffered into large writes.
  std::string buf;
  buf.reserve(1 << 20);
  absl::Status st;
  uint64_t written = 0;
  for_each_row([&](uint64_t id, uint32_t step, std::span<const float> values,
                   std::span<const float> state) {
    if (!st.ok()) return;
    buf.append(reinterpret_cast<const char*>(&id), 8);
    buf.append(reinterpret_cast<const char*>(&step), 4);
    buf.append(reinterpret_cast<const char*>(values.data()), values.size_bytes());
    buf.append(reinterpret_cast<const char*>(state.data()), state.size_bytes());
    ++written;
    if (buf.size() >= (1 << 20)) {
      st = writer_->Append(buf.data(), buf.size());
      buf.clear();
    }
  });
  PS_RETURN_IF_ERROR(st);
  if (written != rows) return absl::InternalError("row count changed while saving");
  return writer_->Append(buf.data(), buf.size());
}

absl::Status ShardFileWriter::AddSketch(uint32_t table, uint32_t rows,
                                        std::span<const uint16_t> cells) {
  if (!sketches_) return absl::InternalError("sketch in a shard file opened without sketches");
  if (sections_left_-- <= 0) return absl::InternalError("more sections than announced");
  if (rows == 0 || cells.size() % rows != 0) return absl::InternalError("ragged sketch");
  SectionHeader s{};
  s.table = table;
  s.kind = 2;
  s.dim = rows;
  s.offset = cells.size() / rows;
  s.count = cells.size();
  s.payload_bytes = cells.size_bytes();
  PS_RETURN_IF_ERROR(writer_->Append(&s, sizeof(s)));
  return writer_->Append(cells.data(), cells.size_bytes());
}

absl::StatusOr<std::string> ShardFileWriter::Finish() {
  if (sections_left_ != 0) return absl::InternalError("fewer sections than announced");
  return writer_->Commit(ChecksumAt::kTrailer);
}

absl::StatusOr<std::unique_ptr<ShardFile>> ShardFile::Read(const std::string& path) {
  std::unique_ptr<ShardFile> f(new ShardFile());
  PS_ASSIGN_OR_RETURN(f->file_, CheckedFile::Open(path, kShardFile, ChecksumAt::kTrailer));
  const CheckedFile& file = *f->file_;
  auto bad = [&](const std::string& why) { return file.Corrupt(why); };
  if (file.size() < sizeof(FileHeader)) return bad("truncated (shorter than its header)");
  FileHeader h;
  PS_RETURN_IF_ERROR(file.ReadAt(0, &h, sizeof(h)));
  if (h.version != kVersion && h.version != kVersionWithSketches) {
    return bad(absl::StrCat("format version ", h.version));
  }
  f->rank_ = static_cast<int>(h.rank);
  f->servers_ = static_cast<int>(h.servers);
  f->step_ = h.step;
  uint64_t pos = sizeof(FileHeader);
  const uint64_t end = file.size();
  for (uint32_t i = 0; i < h.sections; ++i) {
    if (end - pos < sizeof(SectionHeader)) return bad("section header past the end");
    SectionHeader s;
    PS_RETURN_IF_ERROR(file.ReadAt(pos, &s, sizeof(s)));
    pos += sizeof(s);
    if (s.payload_bytes > end - pos) return bad(absl::StrCat("section ", i, " runs past the end"));
    Section sec;
    sec.info = {s.table, s.kind == 0 ? TableKind::kDense : TableKind::kSparse, s.dim,
                s.state_floats, s.offset, s.count, s.step, s.kind == 2};
    if (s.kind == 0) {
      if (s.count > s.payload_bytes / 4 || s.payload_bytes != 4 * (s.count + uint64_t{s.state_floats})) {
        return bad(absl::StrCat("dense section ", i, " has inconsistent sizes"));
      }
    } else if (s.kind == 1) {
      size_t rec = SparseRecordBytes(s.dim, s.state_floats);
      if (s.dim == 0 || s.count > s.payload_bytes / rec || s.payload_bytes != s.count * rec) {
        return bad(absl::StrCat("sparse section ", i, " has inconsistent sizes"));
      }
      sec.rows_at = pos;
    } else if (s.kind == 2 && h.version >= kVersionWithSketches) {
      if (s.dim == 0 || s.count > s.payload_bytes / 2 || s.payload_bytes != 2 * s.count ||
          s.offset == 0 || s.count / s.dim != s.offset || s.count % s.dim != 0) {
        return bad(absl::StrCat("admission sketch section ", i, " has inconsistent sizes"));
      }
    } else {
      return bad(absl::StrCat("section ", i, " has an unknown kind"));
    }
    if (s.kind != 1) {  // dense weights and state, or sketch counters: kept
      std::vector<char>& bytes = f->payloads_.emplace_back(s.payload_bytes);
      PS_RETURN_IF_ERROR(file.ReadAt(pos, bytes.data(), bytes.size()));
      const char* p = bytes.data();
      if (s.kind == 0) {
        sec.weights = {reinterpret_cast<const float*>(p), s.count};
        sec.state = {reinterpret_cast<const float*>(p + 4 * s.count), s.state_floats};
      } else {
        sec.sketch = {reinterpret_cast<const uint16_t*>(p), s.count};
      }
    }
    pos += s.payload_bytes;
    f->sections_.push_back(sec);
  }
  if (pos != end) return bad("trailing bytes after the sections");
  return f;
}

absl::Status ShardFile::ForEachRow(const Section& s,
                                   absl::FunctionRef<void(const SparseRowView&)> fn) const {
  const size_t rec = SparseRecordBytes(s.info.dim, s.info.state_floats);
  // Whole records per read, about 1 MiB; floats are read unaligned (x86).
  const uint64_t per_chunk = std::max<size_t>(1, (1 << 20) / rec);
  std::vector<char> chunk(static_cast<size_t>(std::min<uint64_t>(per_chunk, s.info.count) * rec));
  for (uint64_t first = 0; first < s.info.count; first += per_chunk) {
    const uint64_t n = std::min<uint64_t>(per_chunk, s.info.count - first);
    PS_RETURN_IF_ERROR(
        file_->ReadAt(s.rows_at + first * rec, chunk.data(), static_cast<size_t>(n * rec)));
    for (uint64_t r = 0; r < n; ++r) {
      const char* p = chunk.data() + r * rec;
      SparseRowView v;
      std::memcpy(&v.id, p, 8);
      std::memcpy(&v.step, p + 8, 4);
      v.values = {reinterpret_cast<const float*>(p + 12), s.info.dim};
      v.state = {reinterpret_cast<const float*>(p + 12 + 4 * size_t{s.info.dim}),
                 s.info.state_floats};
      fn(v);
    }
  }
  return absl::OkStatus();
}

}  // namespace pstrain
