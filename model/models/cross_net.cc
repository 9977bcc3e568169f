#include "model/models/cross_net.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace pstrain::worker {

CrossNet::CrossNet(TableRegistry* registry, const std::string& prefix, int width, int layers,
                   int rank, uint64_t seed)
    : width_(width), rank_(rank) {
  const uint64_t w = static_cast<uint64_t>(width);
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    if (low_rank()) {
      layer.v = registry->AddDense(absl::StrCat(prefix, ".", l, ".v"), w * rank_,
                                   LinearWeightInit(width_, seed));
      layer.weight = registry->AddDense(absl::StrCat(prefix, ".", l, ".u"), w * rank_,
                                        LinearWeightInit(rank_, seed));
    } else {
      layer.weight = registry->AddDense(absl::StrCat(prefix, ".", l, ".weight"), w * w,
                                        LinearWeightInit(width_, seed));
    }
    layer.bias = registry->AddDense(absl::StrCat(prefix, ".", l, ".bias"), w, ZeroInit(seed));
    layers_.push_back(layer);
  }
}

absl::StatusOr<CrossNet> CrossNet::FromTables(const std::vector<TableSpec>& tables,
                                              const std::string& prefix, int width, int layers,
                                              int rank) {
  auto find = [&](const std::string& name, uint64_t size) -> absl::StatusOr<uint32_t> {
    for (const TableSpec& t : tables) {
      if (t.name != name) continue;
      if (t.kind != TableKind::kDense || t.size != size) {
        return absl::InvalidArgumentError(
            absl::StrCat("table ", name, " has ", t.size, " floats, the cross net needs ", size));
      }
      return t.id;
    }
    return absl::InvalidArgumentError(absl::StrCat("the model has no table ", name));
  };
  CrossNet net(width, rank);
  const uint64_t w = static_cast<uint64_t>(width);
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    if (net.low_rank()) {
      PS_ASSIGN_OR_RETURN(layer.v, find(absl::StrCat(prefix, ".", l, ".v"), w * rank));
      PS_ASSIGN_OR_RETURN(layer.weight, find(absl::StrCat(prefix, ".", l, ".u"), w * rank));
    } else {
      PS_ASSIGN_OR_RETURN(layer.weight, find(absl::StrCat(prefix, ".", l, ".weight"), w * w));
    }
    PS_ASSIGN_OR_RETURN(layer.bias, find(absl::StrCat(prefix, ".", l, ".bias"), w));
    net.layers_.push_back(layer);
  }
  return net;
}

std::vector<uint32_t> CrossNet::table_ids() const {
  std::vector<uint32_t> ids;
  for (const Layer& l : layers_) {
    if (low_rank()) ids.push_back(l.v);
    ids.push_back(l.weight);
    ids.push_back(l.bias);
  }
  return ids;
}

absl::Status CrossNet::Forward(nn::Device& device, nn::ConstMatrixView x0,
                               const std::vector<const float*>& params, Activations* acts,
                               nn::MatrixView out) {
  const int rows = x0.rows;
  const size_t n = layers_.size();
  const size_t block = static_cast<size_t>(rows) * width_;
  PS_RETURN_IF_ERROR(acts->u.ReserveElements(&device, n * block));
  PS_RETURN_IF_ERROR(acts->x.ReserveElements(&device, (n - 1) * block));
  if (low_rank()) {
    PS_RETURN_IF_ERROR(acts->v.ReserveElements(&device, n * rows * static_cast<size_t>(rank_)));
  }
  acts->rows = rows;
  nn::ConstMatrixView xl = x0;
  for (size_t l = 0; l < n; ++l) {
    const Layer& layer = layers_[l];
    const int li = static_cast<int>(l);
    nn::MatrixView u = Slice(acts->u, li, rows, width_);
    if (low_rank()) {
      nn::MatrixView v = Slice(acts->v, li, rows, rank_);
      PS_RETURN_IF_ERROR(
          device.LinearForward(xl, params[layer.v], nullptr, nn::Activation::kNone, v));
      PS_RETURN_IF_ERROR(device.LinearForward(v, params[layer.weight], params[layer.bias],
                                              nn::Activation::kNone, u));
    } else {
      PS_RETURN_IF_ERROR(device.LinearForward(xl, params[layer.weight], params[layer.bias],
                                              nn::Activation::kNone, u));
    }
    nn::MatrixView next = l + 1 == n ? out : Slice(acts->x, li, rows, width_);
    PS_RETURN_IF_ERROR(device.CrossCombineForward(x0, u, xl, next));
    xl = next;
  }
  return absl::OkStatus();
}

absl::Status CrossNet::Backward(nn::Device& device, nn::ConstMatrixView x0,
                                const std::vector<const float*>& params, const Activations& acts,
                                nn::MatrixView d_out, const std::vector<float*>& grads,
                                nn::MatrixView dx0, bool accumulate,
                                const std::function<void(uint32_t)>* ready) {
  const int rows = x0.rows;
  if (acts.rows != rows) {
    return absl::InternalError(absl::StrCat("cross net: backward of ", rows,
                                            " rows after a forward of ", acts.rows));
  }
  const size_t block = static_cast<size_t>(rows) * width_;
  PS_RETURN_IF_ERROR(du_.ReserveElements(&device, block));
  PS_RETURN_IF_ERROR(dx_.ReserveElements(&device, block));
  if (low_rank()) {
    PS_RETURN_IF_ERROR(dv_.ReserveElements(&device, static_cast<size_t>(rows) * rank_));
  }
  nn::MatrixView du(du_.as(), rows, width_);
  nn::MatrixView dxl(dx_.as(), rows, width_);
  nn::MatrixView g = d_out;  // dL/dx_{l+1}, becomes dL/dx_l
  for (size_t l = layers_.size(); l-- > 0;) {
    const Layer& layer = layers_[l];
    const int li = static_cast<int>(l);
    nn::ConstMatrixView u = Slice(acts.u, li, rows, width_);
    nn::ConstMatrixView xl = l == 0 ? x0 : nn::ConstMatrixView(Slice(acts.x, li - 1, rows, width_));
    // dx0 collects g * u_l from every layer; the first write overwrites it.
    PS_RETURN_IF_ERROR(device.CrossCombineBackward(g, x0, u, du, dx0,
                                                   /*accumulate=*/l + 1 != layers_.size()));
    if (low_rank()) {
      nn::ConstMatrixView v = Slice(acts.v, li, rows, rank_);
      nn::MatrixView dv(dv_.as(), rows, rank_);
      PS_RETURN_IF_ERROR(device.LinearBackward(v, params[layer.weight], u, nn::Activation::kNone,
                                               du, grads[layer.weight], grads[layer.bias], dv,
                                               accumulate));
      PS_RETURN_IF_ERROR(device.LinearBackward(xl, params[layer.v], v, nn::Activation::kNone, dv,
                                               grads[layer.v], nullptr, dxl, accumulate));
    } else {
      PS_RETURN_IF_ERROR(device.LinearBackward(xl, params[layer.weight], u,
                                               nn::Activation::kNone, du, grads[layer.weight],
                                               grads[layer.bias], dxl, accumulate));
    }
    PS_RETURN_IF_ERROR(device.AddMatrix(dxl, g));  // the x_l term passes g through
    if (ready != nullptr) {
      if (low_rank()) (*ready)(layer.v);
      (*ready)(layer.weight);
      (*ready)(layer.bias);
    }
  }
  return device.AddMatrix(g, dx0);  // x_0 is also the first layer's x_l
}

}  // namespace pstrain::worker
