// libFuzzer target: bytes -> a gzip or zstd file -> the LineReader that
// decompresses it. Must never crash or hang; damaged data is a DataLoss
// error. The first byte picks the format; the magic bytes are prepended so
// that inputs reach the decoders.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "data/file_set.h"
#include "data/line_reader.h"

using namespace pstrain::worker;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool gzip = data[0] % 2 == 0;
  std::string bytes = gzip ? std::string("\x1f\x8b", 2) : std::string("\x28\xb5\x2f\xfd", 4);
  bytes.append(reinterpret_cast<const char*>(data) + 1, size - 1);
  int fd = memfd_create("decompress_fuzzer", MFD_CLOEXEC);
  if (fd < 0 || write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
    if (fd >= 0) close(fd);
    return 0;
  }
  const InputFile file{"/proc/self/fd/" + std::to_string(fd), bytes.size(),
                       gzip ? Compression::kGzip : Compression::kZstd};
  LineReader reader(64, 32);
  if (reader.Open(file, 0, file.size).ok()) {
    LineReader::Line line;
    while (true) {
      absl::StatusOr<bool> more = reader.Next(&line);
      if (!more.ok()) {
        if (more.status().code() != absl::StatusCode::kDataLoss) __builtin_trap();
        break;
      }
      if (!*more) break;
      if (!line.overlong && line.text.size() > 32) __builtin_trap();
    }
  }
  close(fd);
  return 0;
}
