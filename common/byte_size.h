// Byte sizes as users write them in flags: "1073741824", "512MiB", "1GB",
// "64M", "2g". K, M, G, T (with or without "B" or "iB", any case) are
// powers of 1024, as memory sizes are in most tools that take them.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace pstrain {

// InvalidArgument naming `text` for anything else (or a size past 2^63).
absl::StatusOr<uint64_t> ParseByteSize(absl::string_view text);

}  // namespace pstrain
