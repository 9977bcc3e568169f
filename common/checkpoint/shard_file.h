// The file one server writes for a checkpoint: every table section it holds
// (weights, optimizer state, step counts), then a checksum of all of it.
//
//   header, 32 bytes: "PSTRCKP1", u32 version (1, or 2 when it holds an
//                     admission sketch), u32 server rank,
//                     u32 servers, u32 sections, u64 step
//   per section, 48-byte header: u32 table, u8 kind (0 dense, 1 sparse),
//                     3 zero bytes, u32 dim, u32 state_floats, u64 offset,
//                     u64 count, u64 step, u64 payload bytes
//     dense payload:  f32 weights[count], f32 state[state_floats]
//                     (state: the optimizer's planes, each `count` floats)
//     sparse payload: count x { u64 id, u32 step, f32 values[dim],
//                     f32 state[state_floats] }
//     sketch payload (kind 2, version 2; a sparse table's admission sketch,
//                     the cellwise max of the server's parts): u16 counters[count],
//                     `dim` rows of `offset` (the width) counters each
//   trailer: u64 Checksum64 of everything before it
// Little-endian. Written and verified as a CheckedFile (checked_file.h:
// temp, fsync, rename; the checksum checked before the contents are read);
// every size is checked against the file's length before touching the
// data, so a corrupt or truncated file is refused with a DataLoss naming it. A shard is never held in memory whole: Read streams the
// file once for its checksum and keeps the (small) dense and sketch payloads;
// sparse rows are streamed from the open file by ForEachRow, so a server
// restores a table many times its RAM.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/checkpoint/checked_file.h"
#include "common/table_spec.h"

namespace pstrain {

struct ShardSectionInfo {
  uint32_t table = 0;
  TableKind kind = TableKind::kDense;
  uint32_t dim = 0;
  uint32_t state_floats = 0;
  uint64_t offset = 0;
  uint64_t count = 0;
  uint64_t step = 0;
  bool sketch = false;  // kind 2: an admission sketch of sparse table `table`
};

class ShardFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<ShardFileWriter>> Open(const std::string& path, int rank,
                                                               int servers, int sections,
                                                               uint64_t step,
                                                               bool with_sketches = false);
  absl::Status AddDense(uint32_t table, uint64_t offset, std::span<const float> weights,
                        std::span<const float> state, uint64_t step);
  // `rows` calls its argument once per row: (id, step, values, state).
  using RowSink = absl::FunctionRef<void(uint64_t, uint32_t, std::span<const float>,
                                         std::span<const float>)>;
  absl::Status AddSparse(uint32_t table, uint32_t dim, uint32_t state_floats, uint64_t rows,
                         absl::FunctionRef<void(RowSink)> for_each_row);
  // `cells`: `rows` rows of cells.size() / rows counters.
  // REQUIRES: opened with_sketches.
  absl::Status AddSketch(uint32_t table, uint32_t rows, std::span<const uint16_t> cells);
  // Writes the trailer and commits; returns the file's checksum (hex).
  absl::StatusOr<std::string> Finish();
  uint64_t bytes() const { return writer_->bytes(); }

 private:
  explicit ShardFileWriter(std::unique_ptr<CheckedFileWriter> w, int sections, bool sketches)
      : writer_(std::move(w)), sections_left_(sections), sketches_(sketches) {}
  std::unique_ptr<CheckedFileWriter> writer_;
  int sections_left_;
  bool sketches_;
};

// A verified shard file: its sections, dense and sketch payloads in memory,
// sparse rows read from the file on demand.
class ShardFile {
 public:
  struct SparseRowView {
    uint64_t id;
    uint32_t step;
    std::span<const float> values;
    std::span<const float> state;
  };
  struct Section {
    ShardSectionInfo info;
    std::span<const float> weights;  // dense
    std::span<const float> state;    // dense
    uint64_t rows_at = 0;            // sparse records: their offset in the file
    std::span<const uint16_t> sketch;  // sketch counters (info.sketch)
  };

  static absl::StatusOr<std::unique_ptr<ShardFile>> Read(const std::string& path);
  ShardFile(const ShardFile&) = delete;
  ShardFile& operator=(const ShardFile&) = delete;

  int rank() const { return rank_; }
  int servers() const { return servers_; }
  uint64_t step() const { return step_; }
  const std::string& checksum() const { return file_->checksum(); }
  uint64_t bytes() const { return file_->file_bytes(); }
  const std::vector<Section>& sections() const { return sections_; }
  // Streams a sparse section's rows, in the order they were written. A read
  // error, or a file cut short since Read, is an error naming the file.
  absl::Status ForEachRow(const Section& s,
                          absl::FunctionRef<void(const SparseRowView&)> fn) const;

 private:
  ShardFile() = default;

  std::unique_ptr<CheckedFile> file_;
  std::vector<std::vector<char>> payloads_;  // dense and sketch sections' bytes
  int rank_ = 0;
  int servers_ = 0;
  uint64_t step_ = 0;
  std::vector<Section> sections_;
};

}  // namespace pstrain
