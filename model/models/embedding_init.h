// How an embedding table's rows start: the job's --embedding_init (job
// field tables.*.init), a model file's "embedding_init" or one table's
// "table_init". Plain data plus the text forms both take.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/table_spec.h"

namespace pstrain::worker {

struct EmbeddingInitSpec {
  enum class Kind {
    kUniformDim,   // U(+-1/sqrt(dim)): a row's norm near 1/sqrt(3) at any width
    kUniformRows,  // U(+-sqrt(1/rows)), rows = the table's hash buckets (TorchRec's default)
    kUniform,      // U(+-scale)
    kNormal,       // N(0, scale^2)
    kZeros,
  };
  Kind kind = Kind::kUniform;
  float scale = 0.01f;  // kUniform, kNormal

  bool operator==(const EmbeddingInitSpec& o) const {
    return kind == o.kind && (kind != Kind::kUniform && kind != Kind::kNormal ? true : scale == o.scale);
  }
};

// The default of --embedding_init: U(+-0.1). Over 3 data sets (two real:
// flights and MovieLens; one generated), DLRM's eval AUC from U(+-0.1) is
// the best of the starts that need no table size: against U(+-0.05) (the
// default of 2026-12-07) +0.0030, -0.0002 and +0.0020 by paired means over
// seeds, against U(+-1/sqrt(dim)) (the one before) ahead on each; as good as
// U(+-sqrt(1/rows)) with rows = the vocabulary, which needs bounded ids
// (bench/results/2026-12-07-issue39-init.md).
EmbeddingInitSpec DefaultEmbeddingInit();

// "uniform:SCALE", "normal:SCALE", "uniform:1/sqrt(dim)",
// "uniform:sqrt(1/rows)" or "zeros"; SCALE in (0, 100]. InvalidArgument
// saying the forms otherwise.
absl::StatusOr<EmbeddingInitSpec> ParseEmbeddingInit(absl::string_view text);
// The text ParseEmbeddingInit takes back.
std::string EmbeddingInitText(const EmbeddingInitSpec& spec);

// The initializer of the rows of table `table` (its name, for errors) of
// `dim` floats and `rows` hash buckets (0: unbounded ids). InvalidArgument
// for U(+-sqrt(1/rows)) on a table of unbounded ids.
absl::StatusOr<InitializerConfig> EmbeddingRowInit(const EmbeddingInitSpec& spec,
                                                   const std::string& table, int dim,
                                                   uint64_t rows, uint64_t seed);

}  // namespace pstrain::worker
