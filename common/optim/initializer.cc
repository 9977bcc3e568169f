#include "common/optim/initializer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace pstrain::optim {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr double kTwoPow32 = 4294967296.0;

// Box-Muller on the two 32-bit halves of `bits`: a pair of independent
// N(0, 1) samples. u1 is in (0, 1] so the log is finite.
void NormalPair(uint64_t bits, double* z0, double* z1) {
  double u1 = (static_cast<double>(bits >> 32) + 1.0) / kTwoPow32;
  double u2 = static_cast<double>(bits & 0xffffffffULL) / kTwoPow32;
  double r = std::sqrt(-2.0 * std::log(u1));
  *z0 = r * std::cos(kTwoPi * u2);
  *z1 = r * std::sin(kTwoPi * u2);
}

}  // namespace

absl::StatusOr<Initializer> Initializer::Create(const InitializerConfig& config,
                                                uint32_t table_id) {
  if (config.kind > InitKind::kConstant) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown initializer kind ", static_cast<int>(config.kind)));
  }
  if (!std::isfinite(config.scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer scale = ", config.scale, " is not finite"));
  }
  if ((config.kind == InitKind::kUniform || config.kind == InitKind::kNormal) &&
      config.scale < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("initializer scale = ", config.scale, " must be >= 0"));
  }
  return Initializer(config, table_id);
}

Initializer::Initializer(const InitializerConfig& config, uint32_t table_id)
    : config_(config), table_key_(Mix64(config.seed ^ Mix64(0x7461626c65000000ULL ^ table_id))) {}

uint64_t Initializer::RowKey(uint64_t row) const { return Mix64(table_key_ ^ row); }

float Initializer::Value(uint64_t row, uint32_t column) const {
  switch (config_.kind) {
    case InitKind::kZeros:
      return 0.0f;
    case InitKind::kConstant:
      return config_.scale;
    case InitKind::kUniform:
      return (2.0f * UnitFloat(Mix64(RowKey(row) + column)) - 1.0f) * config_.scale;
    case InitKind::kNormal: {
      // Columns 2p and 2p+1 share one Box-Muller pair.
      double z0, z1;
      NormalPair(Mix64(RowKey(row) + column / 2), &z0, &z1);
      return static_cast<float>((column % 2 == 0 ? z0 : z1) * config_.scale);
    }
  }
  return 0.0f;
}

void Initializer::FillRow(uint64_t row, float* out, size_t dim) const {
  switch (config_.kind) {
    case InitKind::kZeros:
    case InitKind::kConstant:
      std::fill(out, out + dim, config_.kind == InitKind::kZeros ? 0.0f : config_.scale);
      return;
    case InitKind::kUniform: {
      const uint64_t key = RowKey(row);
      for (size_t c = 0; c < dim; ++c) {
        out[c] = (2.0f * UnitFloat(Mix64(key + c)) - 1.0f) * config_.scale;
      }
      return;
    }
    case InitKind::kNormal: {
      const uint64_t key = RowKey(row);
      const double s = config_.scale;
      for (size_t c = 0; c < dim; c += 2) {
        double z0, z1;
        NormalPair(Mix64(key + c / 2), &z0, &z1);
        out[c] = static_cast<float>(z0 * s);
        if (c + 1 < dim) out[c + 1] = static_cast<float>(z1 * s);
      }
      return;
    }
  }
}

void Initializer::FillRange(uint64_t begin, float* out, size_t n) const {
  if (config_.kind == InitKind::kZeros || config_.kind == InitKind::kConstant) {
    FillRow(0, out, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) out[i] = Value(begin + i, 0);
}

}  // namespace pstrain::optim
