// The feature-crossing layers beside DLRM's dot interaction, on the CPU:
//  - DCN-v2's cross combine (Wang et al. 2021, "DCN V2"): a cross layer is
//    x_{l+1} = x_0 * (W_l x_l + b_l) + x_l (elementwise *), the product
//    W_l x_l being an ordinary Linear (or two, U_l (V_l x_l), low rank);
//    these functions are the rest of it.
//  - The factorization machine's second-order term (Rendle 2010; DeepFM, Guo
//    et al. 2017): sum over field pairs i < j of <v_i, v_j>, computed as
//    0.5 * sum_k ((sum_f v_fk)^2 - sum_f v_fk^2) in O(fields x dim).
// Views may be strided. Stateless and thread-safe for distinct outputs.
#pragma once

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// out = x0 * u + xl. REQUIRES: same shapes; out may equal xl.
void CrossCombineForward(ConstMatrixView x0, ConstMatrixView u, ConstMatrixView xl,
                         MatrixView out);

// Backward of CrossCombineForward given dL/dout `g`: du = g * x0 (overwritten)
// and dx0 = g * u (or += with `accumulate`). The xl term's gradient is g
// itself (the caller adds it). REQUIRES: du does not alias g, x0 or u.
void CrossCombineBackward(ConstMatrixView g, ConstMatrixView x0, ConstMatrixView u,
                          MatrixView du, MatrixView dx0, bool accumulate);

// dst += src. REQUIRES: same shape.
void AddMatrix(ConstMatrixView src, MatrixView dst);

// out[b, 0] (or += with `accumulate`) = sum_{i<j} <t_i, t_j> over the n
// vectors of width dim of row b (t: [B x n*dim], out: [B x 1]).
void FmForward(ConstMatrixView t, int n, int dim, bool accumulate, MatrixView out);

// dt[b, i*dim + k] (or += with `accumulate`) = dy[b, 0] * (sum_f t_fk - t_ik).
void FmBackward(ConstMatrixView t, ConstMatrixView dy, int n, int dim, bool accumulate,
                MatrixView dt);

}  // namespace pstrain::worker::nn
