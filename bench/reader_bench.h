// Reader throughput on compressed input: one Criteo-shaped synthetic TSV,
// written plain and compressed (gzip at zlib's default level, zstd level
// 3), scanned by one ShardScanner on one thread (reading, decompressing and
// parsing), best of a few passes each. One JSON line per input, with the
// ratio to the plain TSV of the same run.
//
// With `data`: those files (text or Parquet, in a schema's layout) read by
// a DataReader end to end (batches built), once per reader_threads value:
// an untimed pass (which warms the page cache and checksums the batches),
// then `passes` timed ones, each with a new reader. One JSON line per
// value; inputs holding the same rows give the same checksum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace pstrain::bench {

struct ReaderBenchOptions {
  int64_t rows = 200000;  // in the generated file
  int passes = 3;         // scans of each input; the fastest is reported
  std::string temp_dir;   // "" = $TMPDIR or /tmp
  // Files or globs to read instead of the synthetic inputs.
  std::vector<std::string> data;
  std::string schema;               // of `data`: a schema file ("": the Criteo layout)
  std::vector<int> threads = {1};   // ReaderOptions::reader_threads values
  int batch_size = 1024;
};

// Prints {bench:"reader",input,rows,file_bytes,text_bytes,rows_per_sec,
// text_mb_per_sec,vs_tsv,rows_per_cpu_sec,vs_tsv_cpu,...} per input; with
// `data`, {bench:"reader",input,format,threads,rows,file_bytes,rows_per_sec
// (the median pass),best_rows_per_sec,rows_per_cpu_sec (every thread's
// CPU),checksum,...} per threads value. InvalidArgument for bad options;
// I/O, decoding and schema errors.
absl::Status RunReaderBench(const ReaderBenchOptions& options);

}  // namespace pstrain::bench
