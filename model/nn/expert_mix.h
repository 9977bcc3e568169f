// A mixture-of-experts gate's mix on the CPU (MMoE, Ma et al. 2018; PLE):
// per row, g = softmax(z) over the k experts and out = sum_e g_e y_e, with
// y = [y_1 | ... | y_k] the experts' outputs side by side (each out.cols
// wide). Stateless; thread-safe for distinct outputs.
#pragma once

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// z, g: [rows x k]; y: [rows x k * width]; out: [rows x width].
void ExpertMixForward(ConstMatrixView z, ConstMatrixView y, MatrixView g, MatrixView out);

// Given the forward's g and y and dL/dout: dy_e = g_e dL/dout (overwritten)
// and dz_e = g_e (dL/dg_e - sum_j g_j dL/dg_j), dL/dg_e = <dL/dout, y_e>.
void ExpertMixBackward(ConstMatrixView g, ConstMatrixView y, ConstMatrixView d_out,
                       MatrixView dz, MatrixView dy);

}  // namespace pstrain::worker::nn
