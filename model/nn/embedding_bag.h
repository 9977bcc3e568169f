// EmbeddingBag on the CPU: pools (sum or mean) the rows of a multi-hot bag
// per sample, reading rows from the compact [unique x dim] matrix that the
// trainer fetched for this batch; the backward pass scatter-adds into the
// matching [unique x dim] gradient rows. Stateless, thread-safe for distinct
// outputs.
#pragma once

#include <cstdint>

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

enum class Pooling : unsigned char { kSum = 0, kMean = 1 };

// The bags of one field for one batch, CSR style: sample b owns the rows
// index[offsets[b] .. offsets[b + 1]) of the row matrix. An empty bag pools
// to zeros.
struct Bags {
  const uint32_t* index = nullptr;    // row positions in the [unique x dim] matrix
  const uint32_t* offsets = nullptr;  // [batch + 1]
  int batch = 0;
  // The same offsets in host memory (the same pointer on the CPU), for the
  // sizes a layer needs on the host (DIN's item count); null where the
  // caller has none.
  const uint32_t* host_offsets = nullptr;
};

// out[b, :] (+)= pool_{k in bag b} rows[index[k], :], dim = out.cols.
// With `accumulate` the pooled vector is added to `out`, else it overwrites.
// REQUIRES: every index < number of rows; out.rows == bags.batch.
void EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling, bool accumulate,
                         MatrixView out);

// d_rows[index[k], :] += d_out[b, :] (/ bag size for mean) for every k in
// bag b. Adds: the caller zeroes d_rows once per step (several fields may
// share a table). dim = d_out.cols.
void EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags, Pooling pooling,
                          float* d_rows);

}  // namespace pstrain::worker::nn
