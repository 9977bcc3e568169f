// Small file helpers that report errors as Status with the path in the
// message.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pstrain {

// Writes `contents` to `path` so that readers see the old file or the whole
// new one, never a part: temp file in the same folder, fsync, rename, fsync
// of the folder.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

absl::StatusOr<std::string> ReadFileToString(const std::string& path);

// mkdir -p.
absl::Status MakeDirs(const std::string& path);

}  // namespace pstrain
