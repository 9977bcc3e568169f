// DIN's attention pooling on the CPU (Zhou et al. 2018), in the ops a device
// runs: the scoring MLP's input rows, the score-weighted sum of each bag's
// items, and their backward. Every bag b of `bags` holds items k in
// [offsets[b], offsets[b+1]) whose rows are items[index[k]] (width dim);
// per-item arrays (features, scores) are indexed by k - first, first =
// offsets[0] (a chunk of a batch starts mid-array). Stateless; thread-safe
// for distinct outputs.
#pragma once

#include <cstdint>

#include "model/nn/embedding_bag.h"
#include "model/nn/tensor.h"

namespace pstrain::worker::nn {

// features row k - first = [h, t_b, h - t_b, h * t_b] for item k of bag b,
// h = its row, t_b = target.row(b); dim = target.cols, features.cols = 4 dim.
void AttentionFeatures(const float* items, const Bags& bags, uint32_t first,
                       ConstMatrixView target, MatrixView features);

// out.row(b) = sum over bag b's items of scores[k - first] * h_k.
void WeightedBagSum(const float* items, const Bags& bags, uint32_t first, const float* scores,
                    MatrixView out);

// d_scores[k - first] = <d_out.row(b), h_k>: dL/dscore of each item.
void WeightedBagDot(ConstMatrixView d_out, const float* items, const Bags& bags, uint32_t first,
                    float* d_scores);

// The items' and the target's gradients, given dL/dout and dL/dfeatures:
// d_items[index[k]] += scores[k-first] d_out_b + df_h + df_(h-t) + df_(h*t) t_b;
// d_target.row(b) = sum over its items of df_t - df_(h-t) + df_(h*t) h
// (overwritten; skipped when d_target.data is null). d_features may be null
// when the bags hold no item.
void AttentionPoolingBackward(ConstMatrixView d_out, ConstMatrixView d_features,
                              const float* items, const Bags& bags, uint32_t first,
                              const float* scores, ConstMatrixView target, float* d_items,
                              MatrixView d_target);

}  // namespace pstrain::worker::nn
