// A versioned export folder (--export_dir), written by the lead worker while
// training and read by `pstrain serve`, `pstrain predict` and
// `pstrain model inspect`:
//
//   DIR/LATEST        the newest complete version's folder name, one line
//                     ("v00000012"), replaced atomically after it is whole
//   DIR/v<seq>/       one version (seq: 8 digits or more, from 1): a model
//                     folder (model_io.h) whose manifest's "export" entry
//                     says seq, kind and base
//     a base          every row of every table
//     a delta         the sparse rows changed since version seq - 1 (their
//                     current values; dirty tracking on the servers:
//                     server/ps/tables/change_log.h), the ids removed since
//                     (eviction), and every dense table in full
//
// Version N is its base B followed by the deltas B + 1 .. N, in order.
// A version is written into DIR/v<seq>.tmp, fsynced, renamed to DIR/v<seq>,
// and only then named in LATEST: a reader that follows LATEST never sees a
// part of a version. After each base, the versions before the
// `keep_bases`-th newest base are removed (a reader in the middle of a
// removed chain fails, keeps what it has and reads LATEST again).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "serve/model_io.h"

namespace pstrain::worker {

// "v00000012".
std::string VersionName(uint64_t seq);
// Whether `dir` is a versioned export folder (holds LATEST).
bool IsVersionedExport(const std::string& dir);
// The seq LATEST names; NotFound when there is no LATEST.
absl::StatusOr<uint64_t> ReadLatest(const std::string& dir);
// The export entry of version `seq` (its manifest only; no table read).
absl::StatusOr<ExportInfo> ReadVersionInfo(const std::string& dir, uint64_t seq);
// Reads one version's folder (a base, or a delta alone), checksums verified.
absl::StatusOr<SavedModel> ReadVersion(const std::string& dir, uint64_t seq);

// Writes `model` (model.exported filled: seq, delta, base) as version
// model.exported.seq of `dir` (made if missing) and points LATEST at it.
absl::Status WriteVersion(const std::string& dir, const SavedModel& model);
// Bytes of the files of version `seq` in `dir` (0 when it is not there).
uint64_t VersionBytes(const std::string& dir, uint64_t seq);
// Removes the versions before the `keep_bases`-th newest base at or below
// LATEST, and leftover .tmp folders. Returns the versions removed.
absl::StatusOr<int> PruneVersions(const std::string& dir, int keep_bases);

// Applies a delta to a whole model: dense tables replaced, sparse rows
// inserted or overwritten, removed ids dropped; step and export entry
// taken from the delta. FailedPrecondition when `delta` is not the version
// after `model` or has other tables.
absl::Status ApplyDelta(SavedModel* model, const SavedModel& delta);
// Version `seq` of `dir` (0: LATEST's) as a whole model: its base with the
// deltas after it applied.
absl::StatusOr<SavedModel> ReadVersionedModel(const std::string& dir, uint64_t seq = 0);

}  // namespace pstrain::worker
