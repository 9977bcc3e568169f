// Reader throughput on compressed input: one Criteo-shaped synthetic TSV,
// written plain and compressed (gzip at zlib's default level, zstd level
// 3), scanned by one ShardScanner on one thread (reading, decompressing and
// parsing), best of a few passes each. One JSON line per input, with the
// ratio to the plain TSV of the same run.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pstrain::bench {

struct ReaderBenchOptions {
  int64_t rows = 200000;  // in the generated file
  int passes = 3;         // scans of each input; the fastest is reported
  std::string temp_dir;   // "" = $TMPDIR or /tmp
};

// Prints {bench:"reader",input,rows,file_bytes,text_bytes,rows_per_sec,
// text_mb_per_sec,vs_tsv,rows_per_cpu_sec,vs_tsv_cpu,...} per input.
// InvalidArgument for bad options; I/O and decoding errors.
absl::Status RunReaderBench(const ReaderBenchOptions& options);

}  // namespace pstrain::bench
