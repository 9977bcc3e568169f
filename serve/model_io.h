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
//   DIR/<table>.removed   a delta's removed ids (model_versions.h), when
//                         there are any: "PSTRDEL1", u64 count, u64[count]
// All numbers little-endian. Files are written atomically (temp + fsync +
// rename) and the manifest last, so a model directory with a manifest is
// complete; reading verifies sizes and checksums and names the bad file.
// A version of an export folder has "export": {seq, kind base|delta, base,
// exported_unix_ms} in its manifest, and a removed-ids entry per sparse
// table that has some.
// A model chosen by --keep_best records in its manifest which evaluation
// chose it ("kept_best": metric, round, step, eval_auc, eval_logloss).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "data/schema.h"
#include "model/models/model.h"

namespace pstrain::worker {

// One table's values: dense tables fill `dense`; sparse tables `ids` and
// `rows` (ids.size() x dim).
struct TableValues {
  TableSpec spec;
  std::vector<float> dense;
  std::vector<uint64_t> ids;
  std::vector<float> rows;
  // Sparse: how an id without a row reads, as the servers read it: zeros
  // (tables with admission or eviction) or the initializer's row.
  bool missing_as_zeros = false;
  // A delta (model_versions.h): ids whose rows the servers removed since
  // the previous version (eviction); they read as missing again.
  std::vector<uint64_t> removed;
};

// Where a model stands in a versioned export folder (model_versions.h).
struct ExportInfo {
  uint64_t seq = 0;    // 0: not a version (a --save_model folder)
  bool delta = false;  // a delta: changed rows only, on top of version seq - 1
  uint64_t base = 0;   // the base this version builds on (itself for a base)
  int64_t exported_unix_ms = 0;  // when the lead wrote it
};

// The evaluation that chose a model (--keep_best); `metric` empty: none.
struct ModelChoice {
  std::string metric;  // eval_auc | eval_logloss
  int round = 0;       // the run's evaluation round (worker/eval/best_round.h)
  int64_t step = 0;
  double eval_auc = 0;
  double eval_logloss = 0;
};

struct SavedModel {
  ModelOptions model;
  Schema schema;
  int64_t step = 0;
  ModelChoice chosen;
  ExportInfo exported;
  std::vector<TableValues> tables;  // by TableSpec::id
};

// Writes the model's files into `dir` (made if missing), each atomically,
// the manifest last. Files of a model already in `dir` are overwritten one
// by one: meanwhile `dir` holds a mix that ReadModel rejects.
absl::Status WriteModel(const std::string& dir, const SavedModel& model);
// Writes the model to `dir`.tmp, then puts it in place of `dir` in one step
// (common/file_util.h ReplaceDirectory): `dir` holds the old model or the
// new one, whole, at every moment. Where the file system cannot swap
// folders (`dir` is a mount point, its parent is read-only, ...), falls
// back to WriteModel in place; `*in_place_reason` (may be null) says why
// (empty: swapped in one step).
absl::Status ReplaceModel(const std::string& dir, const SavedModel& model,
                          std::string* in_place_reason = nullptr);
absl::StatusOr<SavedModel> ReadModel(const std::string& dir);

}  // namespace pstrain::worker
