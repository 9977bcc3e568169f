#include "model/nn/sequence_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace pstrain::worker::nn {

void SequenceInputs(const float* items, const Bags& bags, uint32_t first, const float* positions,
                    int max_length, ConstMatrixView target, MatrixView x) {
  const int d = x.cols;
  const bool with_target = target.data != nullptr;
  for (int b = 0; b < bags.batch; ++b) {
    const uint32_t begin = bags.offsets[b];
    const int n = static_cast<int>(bags.offsets[b + 1] - begin);
    const int shift = with_target ? b : 0, of = with_target ? n + 1 : n;
    for (int i = 0; i < n; ++i) {
      const float* h = items + static_cast<size_t>(bags.index[begin + i]) * d;
      const float* p = positions + static_cast<size_t>(SequencePosition(i, of, max_length)) * d;
      float* row = x.row(static_cast<int>(begin + i - first) + shift);
      for (int c = 0; c < d; ++c) row[c] = h[c] + p[c];
    }
    if (with_target) {
      const float* t = target.row(b);
      float* row = x.row(static_cast<int>(begin + n - first) + shift);
      for (int c = 0; c < d; ++c) row[c] = t[c] + positions[c];
    }
  }
}

void SequenceInputsBackward(ConstMatrixView dx, const Bags& bags, uint32_t first, int max_length,
                            float* d_items, float* d_positions, MatrixView d_target) {
  const int d = dx.cols;
  const bool with_target = d_target.data != nullptr;
  for (int b = 0; b < bags.batch; ++b) {
    const uint32_t begin = bags.offsets[b];
    const int n = static_cast<int>(bags.offsets[b + 1] - begin);
    const int shift = with_target ? b : 0, of = with_target ? n + 1 : n;
    for (int i = 0; i < n; ++i) {
      const float* g = dx.row(static_cast<int>(begin + i - first) + shift);
      float* dh = d_items + static_cast<size_t>(bags.index[begin + i]) * d;
      float* dp = d_positions + static_cast<size_t>(SequencePosition(i, of, max_length)) * d;
      for (int c = 0; c < d; ++c) {
        dh[c] += g[c];
        dp[c] += g[c];
      }
    }
    if (with_target) {
      const float* g = dx.row(static_cast<int>(begin + n - first) + shift);
      float* dt = d_target.row(b);
      for (int c = 0; c < d; ++c) {
        dt[c] = g[c];
        d_positions[c] += g[c];
      }
    }
  }
}

void TargetBagOffsets(const uint32_t* host_offsets, int batch, uint32_t* out) {
  for (int b = 0; b <= batch; ++b) out[b] = host_offsets[b] - host_offsets[0] + static_cast<uint32_t>(b);
}

void SequenceAttention(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v, const Bags& bags,
                       uint32_t first, int heads, int max_n, float* weights, MatrixView out) {
  const int hd = q.cols / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int b = 0; b < bags.batch; ++b) {
    const int g0 = static_cast<int>(bags.offsets[b] - first);
    const int n = static_cast<int>(bags.offsets[b + 1] - bags.offsets[b]);
    for (int i = 0; i < n; ++i) {
      float* o = out.row(g0 + i);
      std::fill(o, o + q.cols, 0.0f);
      for (int h = 0; h < heads; ++h) {
        const int c0 = h * hd;
        const float* qi = q.row(g0 + i) + c0;
        float* a = weights + (static_cast<size_t>(g0 + i) * heads + h) * max_n;
        float top = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* kj = k.row(g0 + j) + c0;
          float s = 0.0f;
          for (int c = 0; c < hd; ++c) s += qi[c] * kj[c];
          a[j] = s * scale;
          top = std::max(top, a[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += (a[j] = std::exp(a[j] - top));
        const float inv = 1.0f / sum;
        for (int j = 0; j < n; ++j) {
          a[j] *= inv;
          const float* vj = v.row(g0 + j) + c0;
          for (int c = 0; c < hd; ++c) o[c0 + c] += a[j] * vj[c];
        }
      }
    }
  }
}

void SequenceAttentionBackward(ConstMatrixView q, ConstMatrixView k, ConstMatrixView v,
                               const float* weights, ConstMatrixView d_out, const Bags& bags,
                               uint32_t first, int heads, int max_n, MatrixView dq, MatrixView dk,
                               MatrixView dv) {
  const int d = q.cols, hd = d / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> da;
  for (int b = 0; b < bags.batch; ++b) {
    const int g0 = static_cast<int>(bags.offsets[b] - first);
    const int n = static_cast<int>(bags.offsets[b + 1] - bags.offsets[b]);
    for (int i = 0; i < n; ++i) {
      std::fill(dq.row(g0 + i), dq.row(g0 + i) + d, 0.0f);
      std::fill(dk.row(g0 + i), dk.row(g0 + i) + d, 0.0f);
      std::fill(dv.row(g0 + i), dv.row(g0 + i) + d, 0.0f);
    }
    da.resize(n);
    for (int h = 0; h < heads; ++h) {
      const int c0 = h * hd;
      for (int i = 0; i < n; ++i) {
        const float* a = weights + (static_cast<size_t>(g0 + i) * heads + h) * max_n;
        const float* g = d_out.row(g0 + i) + c0;
        // out_i = sum_j a_j v_j: dv_j += a_j g, da_j = <g, v_j>; through the
        // softmax, ds_j = a_j (da_j - sum_l a_l da_l).
        float dot = 0.0f;
        for (int j = 0; j < n; ++j) {
          const float* vj = v.row(g0 + j) + c0;
          float* dvj = dv.row(g0 + j) + c0;
          float s = 0.0f;
          for (int c = 0; c < hd; ++c) {
            s += g[c] * vj[c];
            dvj[c] += a[j] * g[c];
          }
          da[j] = s;
          dot += a[j] * s;
        }
        const float* qi = q.row(g0 + i) + c0;
        float* dqi = dq.row(g0 + i) + c0;
        for (int j = 0; j < n; ++j) {
          const float ds = a[j] * (da[j] - dot) * scale;
          const float* kj = k.row(g0 + j) + c0;
          float* dkj = dk.row(g0 + j) + c0;
          for (int c = 0; c < hd; ++c) {
            dqi[c] += ds * kj[c];
            dkj[c] += ds * qi[c];
          }
        }
      }
    }
  }
}

void SequenceMean(ConstMatrixView y, const Bags& bags, uint32_t first, MatrixView out) {
  for (int b = 0; b < bags.batch; ++b) {
    const int g0 = static_cast<int>(bags.offsets[b] - first);
    const int n = static_cast<int>(bags.offsets[b + 1] - bags.offsets[b]);
    float* o = out.row(b);
    std::fill(o, o + out.cols, 0.0f);
    if (n == 0) continue;
    const float inv = 1.0f / static_cast<float>(n);
    for (int i = 0; i < n; ++i) {
      const float* r = y.row(g0 + i);
      for (int c = 0; c < out.cols; ++c) o[c] += r[c] * inv;
    }
  }
}

void SequenceMeanBackward(ConstMatrixView d_out, const Bags& bags, uint32_t first, MatrixView dy) {
  for (int b = 0; b < bags.batch; ++b) {
    const int g0 = static_cast<int>(bags.offsets[b] - first);
    const int n = static_cast<int>(bags.offsets[b + 1] - bags.offsets[b]);
    if (n == 0) continue;
    const float inv = 1.0f / static_cast<float>(n);
    const float* g = d_out.row(b);
    for (int i = 0; i < n; ++i) {
      float* r = dy.row(g0 + i);
      for (int c = 0; c < dy.cols; ++c) r[c] = g[c] * inv;
    }
  }
}

}  // namespace pstrain::worker::nn
