#include "model/nn/embedding_bag.h"

#include <cassert>

namespace pstrain::worker::nn {
namespace {

// out = src or out += scale * src, for one row of `dim` floats.
inline void Axpy(float scale, const float* __restrict src, int dim, float* __restrict out) {
  for (int k = 0; k < dim; ++k) out[k] += scale * src[k];
}

}  // namespace

void EmbeddingBagForward(const float* rows, const Bags& bags, Pooling pooling, bool accumulate,
                         MatrixView out) {
  assert(out.rows == bags.batch);
  const int dim = out.cols;
  for (int b = 0; b < bags.batch; ++b) {
    const uint32_t begin = bags.offsets[b], end = bags.offsets[b + 1];
    float* __restrict o = out.row(b);
    const float scale =
        pooling == Pooling::kMean && end > begin ? 1.0f / static_cast<float>(end - begin) : 1.0f;
    if (!accumulate) {
      if (end == begin) {
        for (int k = 0; k < dim; ++k) o[k] = 0.0f;
        continue;
      }
      // The first row initializes the output: no separate zeroing pass.
      const float* __restrict r = rows + static_cast<size_t>(bags.index[begin]) * dim;
      for (int k = 0; k < dim; ++k) o[k] = scale * r[k];
      for (uint32_t j = begin + 1; j < end; ++j) {
        Axpy(scale, rows + static_cast<size_t>(bags.index[j]) * dim, dim, o);
      }
    } else {
      for (uint32_t j = begin; j < end; ++j) {
        Axpy(scale, rows + static_cast<size_t>(bags.index[j]) * dim, dim, o);
      }
    }
  }
}

void EmbeddingBagBackward(ConstMatrixView d_out, const Bags& bags, Pooling pooling,
                          float* d_rows) {
  assert(d_out.rows == bags.batch);
  const int dim = d_out.cols;
  for (int b = 0; b < bags.batch; ++b) {
    const uint32_t begin = bags.offsets[b], end = bags.offsets[b + 1];
    if (end == begin) continue;
    const float scale =
        pooling == Pooling::kMean ? 1.0f / static_cast<float>(end - begin) : 1.0f;
    const float* g = d_out.row(b);
    for (uint32_t j = begin; j < end; ++j) {
      Axpy(scale, g, dim, d_rows + static_cast<size_t>(bags.index[j]) * dim);
    }
  }
}

}  // namespace pstrain::worker::nn
