// The exported-model format (`--save_model=DIR`, read by `pstrain predict`):
//
//   DIR/model.json        manifest: format, version, model options, schema,
//                         and per table: name, kind, size/dim, rows, file,
//                         bytes and checksum (Checksum64, hex)
//   DIR/<table>.tbl       one file per table:
//     header, 32 bytes:   "PSTRTBL1", u32 version (1), u8 kind (0 dense,
//                         1 sparse), 3 zero bytes, u32 dim (0 for dense),
//                         u32 zero, u64 count (dense: floats; sparse: rows)
//     dense data:         f32[count]
//     sparse data:        count x { u64 id, f32[dim] }
// All numbers little-endian. Files are written atomically (temp + fsync +
// rename) and the manifest last, so a model directory with a manifest is
// complete; reading verifies sizes and checksums and names the bad file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "worker/data/schema.h"
#include "worker/models/model.h"

namespace pstrain::worker {

// One table's values: dense tables fill `dense`; sparse tables `ids` and
// `rows` (ids.size() x dim).
struct TableValues {
  TableSpec spec;
  std::vector<float> dense;
  std::vector<uint64_t> ids;
  std::vector<float> rows;
};

struct SavedModel {
  ModelOptions model;
  Schema schema;
  int64_t step = 0;
  std::vector<TableValues> tables;  // by TableSpec::id
};

absl::Status WriteModel(const std::string& dir, const SavedModel& model);
absl::StatusOr<SavedModel> ReadModel(const std::string& dir);

}  // namespace pstrain::worker
