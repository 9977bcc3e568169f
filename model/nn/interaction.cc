#include "model/nn/interaction.h"

#include <algorithm>
#include <cassert>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define PS_NN_INTERACTION_AVX2 1
#endif

namespace pstrain::worker::nn {
namespace {

constexpr int kLanes = 8;  // samples per tile

struct Scratch {
  AlignedBuffer<float> t;   // [n*dim][kLanes]: the inputs of 8 samples, lane = sample
  AlignedBuffer<float> z;   // [width][kLanes]: outputs or their gradients
  AlignedBuffer<float> dt;  // [n*dim][kLanes]
  AlignedBuffer<float> s;   // [n][n][kLanes]: pair gradients as a symmetric matrix
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

#ifdef PS_NN_INTERACTION_AVX2

// In-register transpose of an 8x8 float block: r[i][j] -> r[j][i].
inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
  }
}

// tile[c * 8 + l] = src[l * stride + c] for c < width; lanes >= rows are 0.
void LoadTile(const float* src, size_t stride, int rows, int width, float* tile) {
  __m256 r[8];
  int c = 0;
  for (; c + 8 <= width; c += 8) {
    if (rows == kLanes) {
      for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(src + l * stride + c);
    } else {
      for (int l = 0; l < 8; ++l) {
        r[l] = l < rows ? _mm256_loadu_ps(src + l * stride + c) : _mm256_setzero_ps();
      }
    }
    Transpose8x8(r);
    for (int q = 0; q < 8; ++q) _mm256_store_ps(tile + (c + q) * kLanes, r[q]);
  }
  for (; c < width; ++c) {
    for (int l = 0; l < kLanes; ++l) tile[c * kLanes + l] = l < rows ? src[l * stride + c] : 0.0f;
  }
}

// dst[l * stride + c] = tile[c * 8 + l] for c < width, l < rows.
void StoreTile(const float* tile, int rows, int width, float* dst, size_t stride) {
  __m256 r[8];
  int c = 0;
  for (; c + 8 <= width; c += 8) {
    for (int q = 0; q < 8; ++q) r[q] = _mm256_load_ps(tile + (c + q) * kLanes);
    Transpose8x8(r);
    for (int l = 0; l < rows; ++l) _mm256_storeu_ps(dst + l * stride + c, r[l]);
  }
  for (; c < width; ++c) {
    for (int l = 0; l < rows; ++l) dst[l * stride + c] = tile[c * kLanes + l];
  }
}

// out[q] = <t_i, t_{j+q}> for q < J, 8 samples at once. ti: t_i's tile
// ([dim][8]); tj: the tiles of J consecutive vectors.
template <int J>
inline void DotBlock(const float* ti, const float* tj, int dim, float* out) {
  __m256 acc[J];
  for (int q = 0; q < J; ++q) acc[q] = _mm256_setzero_ps();
  for (int k = 0; k < dim; ++k) {
    const __m256 a = _mm256_load_ps(ti + k * kLanes);
    for (int q = 0; q < J; ++q) {
      acc[q] = _mm256_fmadd_ps(a, _mm256_load_ps(tj + (q * dim + k) * kLanes), acc[q]);
    }
  }
  for (int q = 0; q < J; ++q) _mm256_store_ps(out + q * kLanes, acc[q]);
}

void ForwardTile(const float* tt, int n, int dim, float* zt) {
  const size_t vec = static_cast<size_t>(dim) * kLanes;  // floats per vector tile
  std::copy(tt, tt + vec, zt);                           // pass-through t_0
  for (int i = 1; i < n; ++i) {
    const float* ti = tt + i * vec;
    float* out = zt + static_cast<size_t>(dim + i * (i - 1) / 2) * kLanes;
    int j = 0;
    for (; j + 8 <= i; j += 8) DotBlock<8>(ti, tt + j * vec, dim, out + j * kLanes);
    if (j + 4 <= i) {
      DotBlock<4>(ti, tt + j * vec, dim, out + j * kLanes);
      j += 4;
    }
    if (j + 2 <= i) {
      DotBlock<2>(ti, tt + j * vec, dim, out + j * kLanes);
      j += 2;
    }
    if (j < i) DotBlock<1>(ti, tt + j * vec, dim, out + j * kLanes);
  }
}

// dtt rows [i0, i0 + R) x columns [k0, k0 + K) = (S t) there, where S is
// the tile's symmetric [n x n] matrix of pair gradients (zero diagonal). R x K
// = 12 independent accumulators keep both FMA pipes busy despite latency.
template <int R, int K>
inline void GradBlock(const float* tt, const float* S, int n, int dim, int i0, int k0,
                      float* dtt) {
  __m256 acc[R][K];
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < K; ++q) acc[r][q] = _mm256_setzero_ps();
  }
  for (int j = 0; j < n; ++j) {
    __m256 g[R];
    for (int r = 0; r < R; ++r) {
      g[r] = _mm256_load_ps(S + (static_cast<size_t>(i0 + r) * n + j) * kLanes);
    }
    const float* tj = tt + (static_cast<size_t>(j) * dim + k0) * kLanes;
    for (int q = 0; q < K; ++q) {
      const __m256 t = _mm256_load_ps(tj + q * kLanes);
      for (int r = 0; r < R; ++r) acc[r][q] = _mm256_fmadd_ps(g[r], t, acc[r][q]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int q = 0; q < K; ++q) {
      _mm256_store_ps(dtt + (static_cast<size_t>(i0 + r) * dim + k0 + q) * kLanes, acc[r][q]);
    }
  }
}

template <int R>
inline void GradRows(const float* tt, const float* S, int n, int dim, int i0, float* dtt) {
  int k0 = 0;
  for (; k0 + 4 <= dim; k0 += 4) GradBlock<R, 4>(tt, S, n, dim, i0, k0, dtt);
  for (; k0 < dim; ++k0) GradBlock<R, 1>(tt, S, n, dim, i0, k0, dtt);
}

// dt_i = sum_{j != i} dz(i, j) t_j (+ the pass-through for t_0), as dt = S t.
// S: scratch for n * n lane vectors.
void BackwardTile(const float* tt, const float* dzt, int n, int dim, float* S, float* dtt) {
  const __m256 zero = _mm256_setzero_ps();
  for (int i = 0; i < n; ++i) {
    _mm256_store_ps(S + (static_cast<size_t>(i) * n + i) * kLanes, zero);
    const float* g_row = dzt + static_cast<size_t>(dim + i * (i - 1) / 2) * kLanes;
    for (int j = 0; j < i; ++j) {
      const __m256 g = _mm256_load_ps(g_row + j * kLanes);
      _mm256_store_ps(S + (static_cast<size_t>(i) * n + j) * kLanes, g);
      _mm256_store_ps(S + (static_cast<size_t>(j) * n + i) * kLanes, g);
    }
  }
  int i0 = 0;
  for (; i0 + 3 <= n; i0 += 3) GradRows<3>(tt, S, n, dim, i0, dtt);
  for (; i0 < n; ++i0) GradRows<1>(tt, S, n, dim, i0, dtt);
  for (int k = 0; k < dim * kLanes; k += kLanes) {  // pass-through gradient of t_0
    _mm256_store_ps(dtt + k, _mm256_add_ps(_mm256_load_ps(dtt + k), _mm256_load_ps(dzt + k)));
  }
}

#endif  // PS_NN_INTERACTION_AVX2

// Portable per-sample versions (and the reference for non-AVX2 builds).
[[maybe_unused]] void ForwardRow(const float* t, int n, int dim, float* z) {
  std::copy(t, t + dim, z);
  float* out = z + dim;
  for (int i = 1; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      float s = 0.0f;
      for (int k = 0; k < dim; ++k) s += t[i * dim + k] * t[j * dim + k];
      *out++ = s;
    }
  }
}

[[maybe_unused]] void BackwardRow(const float* t, const float* dz, int n, int dim, float* dt) {
  std::fill(dt, dt + n * dim, 0.0f);
  for (int k = 0; k < dim; ++k) dt[k] = dz[k];
  const float* g = dz + dim;
  for (int i = 1; i < n; ++i) {
    for (int j = 0; j < i; ++j) {
      const float gij = *g++;
      for (int k = 0; k < dim; ++k) {
        dt[i * dim + k] += gij * t[j * dim + k];
        dt[j * dim + k] += gij * t[i * dim + k];
      }
    }
  }
}

}  // namespace

void DotInteractionForward(ConstMatrixView t, int n, int dim, MatrixView z) {
  assert(t.rows == z.rows && t.cols >= n * dim && z.cols == InteractionOutputWidth(n, dim));
#ifdef PS_NN_INTERACTION_AVX2
  const int in_width = n * dim, out_width = InteractionOutputWidth(n, dim);
  Scratch& s = ThreadScratch();
  s.t.resize(static_cast<size_t>(in_width) * kLanes);
  s.z.resize(static_cast<size_t>(out_width) * kLanes);
  for (int b = 0; b < t.rows; b += kLanes) {
    const int rows = std::min(kLanes, t.rows - b);
    LoadTile(t.row(b), t.stride, rows, in_width, s.t.data());
    ForwardTile(s.t.data(), n, dim, s.z.data());
    StoreTile(s.z.data(), rows, out_width, z.row(b), z.stride);
  }
#else
  for (int b = 0; b < t.rows; ++b) ForwardRow(t.row(b), n, dim, z.row(b));
#endif
}

void DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n, int dim,
                            MatrixView dt) {
  assert(t.rows == dz.rows && t.rows == dt.rows && dz.cols == InteractionOutputWidth(n, dim));
#ifdef PS_NN_INTERACTION_AVX2
  const int in_width = n * dim, out_width = InteractionOutputWidth(n, dim);
  Scratch& s = ThreadScratch();
  s.t.resize(static_cast<size_t>(in_width) * kLanes);
  s.z.resize(static_cast<size_t>(out_width) * kLanes);
  s.dt.resize(static_cast<size_t>(in_width) * kLanes);
  s.s.resize(static_cast<size_t>(n) * n * kLanes);
  for (int b = 0; b < t.rows; b += kLanes) {
    const int rows = std::min(kLanes, t.rows - b);
    LoadTile(t.row(b), t.stride, rows, in_width, s.t.data());
    LoadTile(dz.row(b), dz.stride, rows, out_width, s.z.data());
    BackwardTile(s.t.data(), s.z.data(), n, dim, s.s.data(), s.dt.data());
    StoreTile(s.dt.data(), rows, in_width, dt.row(b), dt.stride);
  }
#else
  for (int b = 0; b < t.rows; ++b) BackwardRow(t.row(b), dz.row(b), n, dim, dt.row(b));
#endif
}

}  // namespace pstrain::worker::nn
