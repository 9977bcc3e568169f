// Layer normalization (Ba et al. 2016) of each row on the CPU, as a device
// runs it: y = gain * (x - mean) / sqrt(var + eps) + bias over the row's
// columns, the mean and 1/sqrt(var + eps) of each row kept in `stats`
// ([rows x 2]) for the backward. Stateless; thread-safe for distinct
// outputs.
#pragma once

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

inline constexpr float kLayerNormEps = 1e-5f;

// y may not alias x. gain and bias hold x.cols floats.
void LayerNormForward(ConstMatrixView x, const float* gain, const float* bias, MatrixView y,
                      float* stats);

// Given dL/dy: dx (overwritten) and dgain, dbias (overwritten, or added to
// with `accumulate`).
void LayerNormBackward(ConstMatrixView x, const float* gain, const float* stats,
                       ConstMatrixView dy, MatrixView dx, float* dgain, float* dbias,
                       bool accumulate);

}  // namespace pstrain::worker::nn
