#include "model/graph/self_attention.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace pstrain::worker {
namespace {

// y[c] (+)= sum_j x[j] W[j * d + c], W [d x d] row-major.
void RowTimes(const float* x, const float* w, int d, float* y, bool add) {
  if (!add) std::fill(y, y + d, 0.0f);
  for (int j = 0; j < d; ++j) {
    const float xj = x[j];
    const float* wr = w + static_cast<size_t>(j) * d;
    for (int c = 0; c < d; ++c) y[c] += xj * wr[c];
  }
}

// dx[j] += sum_c dy[c] W[j * d + c] (dy times W^T); dW[j * d + c] += x[j] dy[c].
void RowTimesBackward(const float* x, const float* w, const float* dy, int d, float* dx,
                      float* dw) {
  for (int j = 0; j < d; ++j) {
    const float* wr = w + static_cast<size_t>(j) * d;
    float* dwr = dw + static_cast<size_t>(j) * d;
    float s = 0.0f;
    for (int c = 0; c < d; ++c) {
      s += dy[c] * wr[c];
      dwr[c] += x[j] * dy[c];
    }
    dx[j] += s;
  }
}

}  // namespace

SelfAttention::SelfAttention(TableRegistry* registry, const std::string& name, int dim, int heads,
                             int max_length, uint64_t seed)
    : dim_(dim), heads_(heads), max_length_(max_length) {
  const uint64_t dd = static_cast<uint64_t>(dim) * dim;
  position_ = registry->AddDense(absl::StrCat(name, ".position"),
                                 static_cast<uint64_t>(max_length) * dim, EmbeddingInit(dim, seed));
  q_ = registry->AddDense(absl::StrCat(name, ".q"), dd, LinearWeightInit(dim, seed));
  k_ = registry->AddDense(absl::StrCat(name, ".k"), dd, LinearWeightInit(dim, seed));
  v_ = registry->AddDense(absl::StrCat(name, ".v"), dd, LinearWeightInit(dim, seed));
  o_ = registry->AddDense(absl::StrCat(name, ".o"), dd, LinearWeightInit(dim, seed));
}

int SelfAttention::Position(int i, int n) const { return std::min(n - 1 - i, max_length_ - 1); }

absl::Status SelfAttention::Forward(nn::Device& device, const float* items, const nn::Bags& seq,
                                    const std::vector<const float*>& params, nn::MatrixView out) {
  if (!device.host_memory()) {
    return absl::UnimplementedError("self_attention runs on the CPU device in this build");
  }
  const int d = dim_, hd = dim_ / heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const uint32_t first = seq.offsets[0];
  const size_t total = seq.offsets[seq.batch] - first;
  rows_ = seq.batch;
  for (auto* v : {&x_, &q_act_, &k_act_, &v_act_, &heads_out_}) v->assign(total * d, 0.0f);
  weight_begin_.assign(seq.batch + 1, 0);
  size_t weights = 0;
  for (int b = 0; b < seq.batch; ++b) {
    weight_begin_[b] = weights;
    const size_t n = seq.offsets[b + 1] - seq.offsets[b];
    weights += n * n * heads_;
  }
  weight_begin_[seq.batch] = weights;
  weights_.assign(weights, 0.0f);
  std::vector<float> y(d), scores;
  for (int b = 0; b < seq.batch; ++b) {
    const uint32_t s = seq.offsets[b];
    const int n = static_cast<int>(seq.offsets[b + 1] - s);
    float* o = out.row(b);
    std::fill(o, o + d, 0.0f);
    if (n == 0) continue;
    const size_t g0 = s - first;
    for (int i = 0; i < n; ++i) {
      const float* h = items + static_cast<size_t>(seq.index[s + i]) * d;
      const float* p = params[position_] + static_cast<size_t>(Position(i, n)) * d;
      float* x = &x_[(g0 + i) * d];
      for (int c = 0; c < d; ++c) x[c] = h[c] + p[c];
      RowTimes(x, params[q_], d, &q_act_[(g0 + i) * d], false);
      RowTimes(x, params[k_], d, &k_act_[(g0 + i) * d], false);
      RowTimes(x, params[v_], d, &v_act_[(g0 + i) * d], false);
    }
    scores.resize(n);
    for (int hh = 0; hh < heads_; ++hh) {
      const int c0 = hh * hd;
      for (int i = 0; i < n; ++i) {
        const float* qi = &q_act_[(g0 + i) * d + c0];
        float top = -INFINITY;
        for (int j = 0; j < n; ++j) {
          const float* kj = &k_act_[(g0 + j) * d + c0];
          float sc = 0.0f;
          for (int c = 0; c < hd; ++c) sc += qi[c] * kj[c];
          scores[j] = sc * scale;
          top = std::max(top, scores[j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += (scores[j] = std::exp(scores[j] - top));
        float* a = &weights_[weight_begin_[b] + (static_cast<size_t>(hh) * n + i) * n];
        float* oi = &heads_out_[(g0 + i) * d + c0];
        for (int j = 0; j < n; ++j) {
          a[j] = scores[j] / sum;
          const float* vj = &v_act_[(g0 + j) * d + c0];
          for (int c = 0; c < hd; ++c) oi[c] += a[j] * vj[c];
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      RowTimes(&heads_out_[(g0 + i) * d], params[o_], d, y.data(), false);
      const float* x = &x_[(g0 + i) * d];
      for (int c = 0; c < d; ++c) o[c] += (x[c] + y[c]) / static_cast<float>(n);
    }
  }
  return absl::OkStatus();
}

absl::Status SelfAttention::Backward(nn::Device& device, const float* items, const nn::Bags& seq,
                                     const std::vector<const float*>& params,
                                     nn::ConstMatrixView d_out, float* d_items,
                                     const std::vector<float*>& grads, bool accumulate,
                                     const std::function<void(uint32_t)>* ready) {
  (void)device;
  (void)items;
  if (seq.batch != rows_) return absl::InternalError("self_attention: backward of other rows");
  const int d = dim_, hd = dim_ / heads_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t dd = static_cast<size_t>(d) * d;
  if (!accumulate) {
    std::fill(grads[position_], grads[position_] + static_cast<size_t>(max_length_) * d, 0.0f);
    for (uint32_t t : {q_, k_, v_, o_}) std::fill(grads[t], grads[t] + dd, 0.0f);
  }
  const uint32_t first = seq.offsets[0];
  std::vector<float> dy(d), dx, dq, dk, dv, dO, da;
  for (int b = 0; b < seq.batch; ++b) {
    const uint32_t s = seq.offsets[b];
    const int n = static_cast<int>(seq.offsets[b + 1] - s);
    if (n == 0) continue;
    const size_t g0 = s - first;
    for (int c = 0; c < d; ++c) dy[c] = d_out.row(b)[c] / static_cast<float>(n);
    dx.assign(static_cast<size_t>(n) * d, 0.0f);
    dq.assign(static_cast<size_t>(n) * d, 0.0f);
    dk.assign(static_cast<size_t>(n) * d, 0.0f);
    dv.assign(static_cast<size_t>(n) * d, 0.0f);
    dO.assign(static_cast<size_t>(n) * d, 0.0f);
    for (int i = 0; i < n; ++i) {
      // Y_i = X_i + O_i W_o: the residual passes dy through.
      for (int c = 0; c < d; ++c) dx[i * d + c] += dy[c];
      RowTimesBackward(&heads_out_[(g0 + i) * d], params[o_], dy.data(), d, &dO[i * d], grads[o_]);
    }
    da.resize(n);
    for (int hh = 0; hh < heads_; ++hh) {
      const int c0 = hh * hd;
      for (int i = 0; i < n; ++i) {
        const float* a = &weights_[weight_begin_[b] + (static_cast<size_t>(hh) * n + i) * n];
        const float* doi = &dO[i * d + c0];
        float dot = 0.0f;
        for (int j = 0; j < n; ++j) {
          const float* vj = &v_act_[(g0 + j) * d + c0];
          float s2 = 0.0f;
          for (int c = 0; c < hd; ++c) {
            s2 += doi[c] * vj[c];
            dv[j * d + c0 + c] += a[j] * doi[c];
          }
          da[j] = s2;
          dot += a[j] * s2;
        }
        const float* qi = &q_act_[(g0 + i) * d + c0];
        for (int j = 0; j < n; ++j) {
          const float ds = a[j] * (da[j] - dot) * scale;
          const float* kj = &k_act_[(g0 + j) * d + c0];
          for (int c = 0; c < hd; ++c) {
            dq[i * d + c0 + c] += ds * kj[c];
            dk[j * d + c0 + c] += ds * qi[c];
          }
        }
      }
    }
    for (int i = 0; i < n; ++i) {
      const float* x = &x_[(g0 + i) * d];
      float* dxi = &dx[i * d];
      RowTimesBackward(x, params[q_], &dq[i * d], d, dxi, grads[q_]);
      RowTimesBackward(x, params[k_], &dk[i * d], d, dxi, grads[k_]);
      RowTimesBackward(x, params[v_], &dv[i * d], d, dxi, grads[v_]);
      float* dh = d_items + static_cast<size_t>(seq.index[s + i]) * d;
      float* dp = grads[position_] + static_cast<size_t>(Position(i, n)) * d;
      for (int c = 0; c < d; ++c) {
        dh[c] += dxi[c];
        dp[c] += dxi[c];
      }
    }
  }
  if (ready != nullptr) {
    for (uint32_t t : {o_, v_, k_, q_, position_}) (*ready)(t);
  }
  return absl::OkStatus();
}

}  // namespace pstrain::worker
