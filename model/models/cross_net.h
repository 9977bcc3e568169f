// CrossNet: DCN-v2's stack of cross layers (Wang et al. 2021) over x_0
// ([B x width]), each keeping the input's width:
//   full rank (rank 0): x_{l+1} = x_0 * (W_l x_l + b_l) + x_l
//   low rank r:         x_{l+1} = x_0 * (U_l (V_l x_l) + b_l) + x_l
// (* elementwise). Tables, per layer l: "<prefix>.<l>.weight" ([width x
// width]) in full rank, else "<prefix>.<l>.v" ([r x width]) and
// "<prefix>.<l>.u" ([width x r]); "<prefix>.<l>.bias" ([width]). Weights
// start U(+-1/sqrt(fan_in)) (nn.Linear's default), biases at zero.
// The activations of one Forward live in an Activations the caller owns, so
// that a pipeline stage can keep one per micro-batch in flight; the backward
// scratch is the CrossNet's own (one Backward at a time). Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/table_spec.h"
#include "model/models/table_registry.h"
#include "model/nn/device.h"
#include "model/nn/tensor.h"

namespace pstrain::worker {

class CrossNet {
 public:
  struct Activations {
    int rows = 0;
    nn::DeviceBuffer v;  // [layers][rows x rank]: V_l x_l (low rank)
    nn::DeviceBuffer u;  // [layers][rows x width]: the products before x_0 *
    nn::DeviceBuffer x;  // [layers - 1][rows x width]: x_1 .. x_{L-1}
  };

  // Declares the tables in `registry`. REQUIRES: width >= 1, layers >= 1,
  // rank >= 0 (0: full rank).
  CrossNet(TableRegistry* registry, const std::string& prefix, int width, int layers, int rank,
           uint64_t seed);

  // The net over the cross tables `tables` already holds (a pipeline stage
  // running a model's layers). InvalidArgument naming a missing or
  // mis-sized table.
  static absl::StatusOr<CrossNet> FromTables(const std::vector<TableSpec>& tables,
                                             const std::string& prefix, int width, int layers,
                                             int rank);

  int width() const { return width_; }
  // Every table the net declared (for pipeline stages' dense table lists).
  std::vector<uint32_t> table_ids() const;

  // out ([B x width], may be a strided view; not x0) = x_L.
  absl::Status Forward(nn::Device& device, nn::ConstMatrixView x0,
                       const std::vector<const float*>& params, Activations* acts,
                       nn::MatrixView out);

  // Given the Forward's x0 and `acts` and dL/dout in `d_out` (modified in
  // place), overwrites (or with `accumulate` adds to) the gradients of every
  // layer's tables and overwrites dx0 with dL/dx0. `ready`, when set, is told
  // each table whose gradient was just written (last layer first).
  absl::Status Backward(nn::Device& device, nn::ConstMatrixView x0,
                        const std::vector<const float*>& params, const Activations& acts,
                        nn::MatrixView d_out, const std::vector<float*>& grads,
                        nn::MatrixView dx0, bool accumulate,
                        const std::function<void(uint32_t)>* ready = nullptr);

 private:
  struct Layer {
    uint32_t v = 0;       // low rank: V_l [rank x width]
    uint32_t weight = 0;  // full rank: W_l [width x width]; low rank: U_l [width x rank]
    uint32_t bias = 0;
  };

  CrossNet(int width, int rank) : width_(width), rank_(rank) {}
  bool low_rank() const { return rank_ > 0; }
  nn::MatrixView Slice(const nn::DeviceBuffer& buf, int layer, int rows, int cols) const {
    return nn::MatrixView(buf.as() + static_cast<size_t>(layer) * rows * cols, rows, cols);
  }

  int width_;
  int rank_;
  std::vector<Layer> layers_;
  nn::DeviceBuffer du_, dv_, dx_;  // backward scratch: [rows x width], [rows x rank], [rows x width]
};

}  // namespace pstrain::worker
