// Inverted dropout (Srivastava et al. 2014) with a counter-based mask: the
// element at row r, column c of a call with seed s is kept iff
// DropoutKeep(s, r * cols + c, rate), a pure function of (seed, index), so
// the CPU and CUDA ops drop the same elements, and so do any chunking of the
// rows that passes each chunk's first row. Kept elements are scaled by
// 1 / (1 - rate) so that evaluation (no dropout) needs no rescaling.
// Stateless and thread-safe for distinct outputs.
#pragma once

#include <cstdint>

#include "model/nn/tensor.h"

#if defined(__CUDACC__)
#define PS_NN_HOST_DEVICE __host__ __device__
#else
#define PS_NN_HOST_DEVICE
#endif

namespace pstrain::worker::nn {

// SplitMix64's finalizer (Steele et al. 2014): a bijective 64-bit mix.
PS_NN_HOST_DEVICE inline uint64_t DropoutMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// True when element `index` survives: a uniform draw on 24 bits >= rate.
PS_NN_HOST_DEVICE inline bool DropoutKeep(uint64_t seed, uint64_t index, float rate) {
  const uint64_t h = DropoutMix(seed ^ DropoutMix(index));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f) >= rate;
}

// One training step's dropout, as a model passes it to its layers: rows
// [first_row, ...) of the batch, drawn with `seed`. rate 0: off (evaluation).
struct DropoutRun {
  float rate = 0.0f;
  uint64_t seed = 0;
  int64_t first_row = 0;
};

// y[r][c] = keep(seed, (first_row + r) * y.cols + c) ? y[r][c] / (1 - rate) : 0.
// REQUIRES: 0 <= rate < 1.
void DropoutForward(MatrixView y, float rate, uint64_t seed, int64_t first_row);

// The backward of DropoutForward for an output that was ReLU'd before it
// (every element it kept is >= 0, every one it dropped is 0): dy[r][c] =
// y[r][c] != 0 ? dy[r][c] / (1 - rate) : 0, y being DropoutForward's output.
// A kept element that was 0 already has no gradient through the ReLU, so y
// alone tells which gradients pass and no mask is stored.
void DropoutBackward(ConstMatrixView y, MatrixView dy, float rate);

}  // namespace pstrain::worker::nn
