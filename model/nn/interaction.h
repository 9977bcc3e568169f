// DLRM dot interaction on the CPU (Naumov et al. 2019, "interaction=dot"):
// for each sample, the bottom-MLP output t_0 and the field embeddings
// t_1..t_{n-1} (all of width dim) give the pairwise dot products of the
// strictly lower triangle (no self-interaction), concatenated after t_0:
//   z = [t_0 | <t_1,t_0> | <t_2,t_0> <t_2,t_1> | <t_3,t_0> ... ]
// i.e. pair (i, j), j < i, sits at column dim + i(i-1)/2 + j.
// The kernels work on tiles of 8 samples with one sample per SIMD lane (8x8
// in-register transposes in and out), so dot products need no horizontal
// sums: the forward computes only the strict lower triangle, the backward is
// dt = S t with S the symmetric matrix of pair gradients (zero diagonal).
// Uses a per-thread scratch tile (grown once, then reused); otherwise
// stateless and thread-safe for distinct outputs.
#pragma once

#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// Number of interaction pairs among n vectors: n(n-1)/2.
inline int InteractionPairs(int n) { return n * (n - 1) / 2; }
// Width of the interaction output for n vectors of width dim.
inline int InteractionOutputWidth(int n, int dim) { return dim + InteractionPairs(n); }

// t: [B x n*dim] (vector k of sample b at t.row(b) + k * dim), z: [B x
// InteractionOutputWidth(n, dim)]. REQUIRES: z does not overlap t.
void DotInteractionForward(ConstMatrixView t, int n, int dim, MatrixView z);

// Backward: dt (overwritten, [B x n*dim]) from dz ([B x width]) and the
// forward input t. dt[:, 0:dim] includes dz[:, 0:dim] (the pass-through).
void DotInteractionBackward(ConstMatrixView t, ConstMatrixView dz, int n, int dim,
                            MatrixView dt);

}  // namespace pstrain::worker::nn
