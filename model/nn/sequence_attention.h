// BST's self-attention over a sequence (Chen et al. 2019) on the CPU, in the
// ops a device runs: each bag's items plus learned positions, the heads'
// softmax attention among a bag's items, the mean over a bag, and their
// backward. The projections (Q, K, V, the output) are Linear ops between
// them (self_attention.h puts them together). Every bag b of `bags` holds
// items k in [offsets[b], offsets[b+1]) whose rows are items[index[k]]
// (width dim); per-item matrices are rows k - first, first = offsets[0] (a
// chunk of a batch starts mid-array). `weights` holds, for item k and head
// h, the softmax over its bag's n items at ((k - first) * heads + h) *
// max_n, max_n >= every bag's size. Stateless; thread-safe for distinct
// outputs.
#pragma once

#include <cstdint>

#include "model/nn/embedding_bag.h"
#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// The position of item i (0: the oldest) of a bag of n: 0 is the most
// recent; items past max_length - 1 positions share the last.
inline int SequencePosition(int i, int n, int max_length) {
  const int p = n - 1 - i;
  return p < max_length - 1 ? p : max_length - 1;
}

// x.row(k - first) = items[index[k]] + positions.row(SequencePosition(i, n)),
// i = k - offsets[b], n = bag b's size; dim = x.cols.
// With a `target` ([batch x dim], BST's candidate item; null data: none),
// bag b is its n items followed by target.row(b), the most recent of n + 1
// (position 0): item i at x.row(k - first + b), position
// SequencePosition(i, n + 1), the target at x.row(offsets[b + 1] - first + b).
// The other ops then take the bags of TargetBagOffsets.
void SequenceInputs(const float* items, const Bags& bags, uint32_t first, const float* positions,
                    int max_length, ConstMatrixView target, MatrixView x);

// d_items[index[k]] += dx.row(k - first) and the position's row of
// d_positions likewise (both add; the caller zeroes them). With a target
// (`d_target` not null, laid out as above), d_target.row(b) = its row of dx
// (written).
void SequenceInputsBackward(ConstMatrixView dx, const Bags& bags, uint32_t first, int max_length,
                            float* d_items, float* d_positions, MatrixView d_target);

// The offsets of the bags with a target appended to each (size batch + 1,
// starting at 0): out[b] = host_offsets[b] - host_offsets[0] + b.
void TargetBagOffsets(const uint32_t* host_offsets, int batch, uint32_t* out);

// For each item k of bag b and head h (columns [h * hd, (h + 1) * hd), hd =
// q.cols / heads): a_j = softmax_j(<q_k, k_j> / sqrt(hd)) over the bag's
// items j, out.row(k - first) = sum_j a_j v_j; the a_j into `weights`.
void SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v, const Bags& bags,
                       uint32_t first, int heads, int max_n, float* weights, MatrixView out);

// Given dL/dout: dq, dk and dv (overwritten).
void SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                               const float* weights, ConstMatrixView d_out, const Bags& bags,
                               uint32_t first, int heads, int max_n, MatrixView dq, MatrixView dk,
                               MatrixView dv);

// out.row(b) = the mean of y's rows of bag b's items (zeros for an empty bag).
void SequenceMean(ConstMatrixView y, const Bags& bags, uint32_t first, MatrixView out);

// dy.row(k - first) = d_out.row(b) / n for every item k of bag b.
void SequenceMeanBackward(ConstMatrixView d_out, const Bags& bags, uint32_t first, MatrixView dy);

}  // namespace pstrain::worker::nn
