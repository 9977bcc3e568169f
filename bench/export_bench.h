// The export bench (`pstrain_bench export`): what a versioned export
// (--export_dir) costs by kind. One server store holds a sparse table of
// --export_rows rows x --dim (Adagrad), every row trained; then
//   base:  the change log cut for a base, every row dumped in pages (as the
//          servers answer the lead) and written as version 1;
//   delta: --export_changed (a fraction) of the rows pushed again, the log
//          cut for a delta since version 1, the changed rows dumped and
//          written as version 2.
// For each: rows, bytes written, bytes per row, seconds to dump and to
// write; then the delta's bytes and time as ratios of the base's (the
// baseline, same run). The folders are removed at the end.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace pstrain::bench {

struct ExportBenchOptions {
  uint64_t rows = 10'000'000;
  uint32_t dim = 16;
  double changed = 0.01;  // fraction of the rows a delta holds
  std::string dir;        // "" : a folder under the temp dir
};

absl::Status RunExportBench(const ExportBenchOptions& options);

}  // namespace pstrain::bench
