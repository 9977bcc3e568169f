#include "model/models/embedding_init.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

constexpr char kForms[] =
    "uniform:SCALE, normal:SCALE, uniform:1/sqrt(dim), uniform:sqrt(1/rows) or zeros "
    "(SCALE in (0, 100])";

}  // namespace

EmbeddingInitSpec DefaultEmbeddingInit() {
  EmbeddingInitSpec s;
  s.kind = EmbeddingInitSpec::Kind::kUniform;
  s.scale = 0.1f;
  return s;
}

absl::StatusOr<EmbeddingInitSpec> ParseEmbeddingInit(absl::string_view text) {
  using Kind = EmbeddingInitSpec::Kind;
  EmbeddingInitSpec s;
  if (text == "zeros") {
    s.kind = Kind::kZeros;
    return s;
  }
  const size_t colon = text.find(':');
  const absl::string_view kind = text.substr(0, colon);
  const absl::string_view arg = colon == absl::string_view::npos ? "" : text.substr(colon + 1);
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not an embedding initializer: ", kForms));
  };
  if (kind != "uniform" && kind != "normal") return bad();
  if (kind == "uniform" && arg == "1/sqrt(dim)") {
    s.kind = Kind::kUniformDim;
    return s;
  }
  if (kind == "uniform" && arg == "sqrt(1/rows)") {
    s.kind = Kind::kUniformRows;
    return s;
  }
  double scale = 0;
  if (!absl::SimpleAtod(arg, &scale) || !(scale > 0 && scale <= 100)) return bad();
  s.kind = kind == "uniform" ? Kind::kUniform : Kind::kNormal;
  s.scale = static_cast<float>(scale);
  return s;
}

std::string EmbeddingInitText(const EmbeddingInitSpec& spec) {
  using Kind = EmbeddingInitSpec::Kind;
  switch (spec.kind) {
    case Kind::kUniformDim:
      return "uniform:1/sqrt(dim)";
    case Kind::kUniformRows:
      return "uniform:sqrt(1/rows)";
    case Kind::kUniform:
      return absl::StrCat("uniform:", spec.scale);
    case Kind::kNormal:
      return absl::StrCat("normal:", spec.scale);
    case Kind::kZeros:
      return "zeros";
  }
  return "zeros";
}

absl::StatusOr<InitializerConfig> EmbeddingRowInit(const EmbeddingInitSpec& spec,
                                                   const std::string& table, int dim,
                                                   uint64_t rows, uint64_t seed) {
  using Kind = EmbeddingInitSpec::Kind;
  InitializerConfig init;
  init.seed = seed;
  init.kind = InitKind::kUniform;
  switch (spec.kind) {
    case Kind::kUniformDim:
      init.scale = 1.0f / std::sqrt(static_cast<float>(dim));
      break;
    case Kind::kUniformRows:
      if (rows == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "table ", table, ": uniform:sqrt(1/rows) needs the table's rows, and its ids are "
            "unbounded: give its column hash_buckets (the schema's, or --hash_buckets)"));
      }
      init.scale = static_cast<float>(std::sqrt(1.0 / static_cast<double>(rows)));
      break;
    case Kind::kUniform:
      init.scale = spec.scale;
      break;
    case Kind::kNormal:
      init.kind = InitKind::kNormal;
      init.scale = spec.scale;
      break;
    case Kind::kZeros:
      init.kind = InitKind::kZeros;
      init.scale = 0.0f;
      break;
  }
  return init;
}

}  // namespace pstrain::worker
