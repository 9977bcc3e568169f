// Table specifications: what a parameter table is, how it is initialized and
// which server-side optimizer updates it. Plain data, sent in messages and
// shared by the coordinator, servers and workers (so it lives in common/:
// the optimizer kernels here and on the workers both read it).
#pragma once

#include <cstdint>
#include <string>

#include <cereal/cereal.hpp>

namespace pstrain {

enum class TableKind : uint8_t { kDense = 0, kSparse = 1 };

enum class OptimizerKind : uint8_t {
  kSgd = 0,             // plain SGD, optional (Nesterov) momentum, L2 weight decay
  kAdagrad = 1,         // per-element accumulator
  kRowwiseAdagrad = 2,  // one accumulator per sparse row (mean of squared grads)
  kAdam = 3,            // per-element moments; per-row step count for sparse rows
  kFtrl = 4,            // FTRL-Proximal (McMahan et al. 2013), per-element z and n
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdagrad;
  float lr = 0.05f;
  float momentum = 0.0f;       // SGD
  bool nesterov = false;       // SGD
  float weight_decay = 0.0f;   // L2 term added to the gradient (SGD, Adagrad, Adam)
  float eps = 1e-8f;           // Adagrad, Adam
  float initial_accumulator = 0.0f;  // Adagrad
  float beta1 = 0.9f;          // Adam
  float beta2 = 0.999f;        // Adam
  float ftrl_beta = 1.0f;      // FTRL: per-coordinate lr = lr / (beta + sqrt(n))
  float ftrl_l1 = 0.0f;        // FTRL
  float ftrl_l2 = 0.0f;        // FTRL

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(kind, lr, momentum, nesterov, weight_decay, eps, initial_accumulator, beta1, beta2,
       ftrl_beta, ftrl_l1, ftrl_l2);
  }
};

enum class InitKind : uint8_t {
  kZeros = 0,
  kUniform = 1,   // U(-scale, scale)
  kNormal = 2,    // N(0, scale^2)
  kConstant = 3,  // every element = scale
};

struct InitializerConfig {
  InitKind kind = InitKind::kZeros;
  float scale = 0.0f;
  uint64_t seed = 0;  // mixed with the table id and the element/row index

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(kind, scale, seed);
  }
};

struct TableSpec {
  uint32_t id = 0;         // dense index into the job's table list
  std::string name;        // e.g. "emb.C7", "top.2.weight"
  TableKind kind = TableKind::kDense;
  uint64_t size = 0;       // dense: number of floats
  uint32_t dim = 0;        // sparse: floats per row
  OptimizerConfig optimizer;
  InitializerConfig init;
  // Dense table kept on the workers (allreduce mode: the workers sum its
  // gradients among themselves and apply the optimizer); servers hold no
  // part of it.
  bool on_workers = false;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(id, name, kind, size, dim, optimizer, init);
    if (version >= 2) ar(on_workers);
  }
};

}  // namespace pstrain

CEREAL_CLASS_VERSION(pstrain::OptimizerConfig, 1);
CEREAL_CLASS_VERSION(pstrain::InitializerConfig, 1);
CEREAL_CLASS_VERSION(pstrain::TableSpec, 2);
