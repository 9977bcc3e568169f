// Table specifications: what a parameter table is, how it is initialized and
// which server-side optimizer updates it. Plain data, sent in messages and
// shared by the coordinator, servers and workers (so it lives in common/:
// the optimizer kernels here and on the workers both read it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

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
  // Version 2: the learning rate ramps up linearly over the first
  // warmup_steps steps (worker clocks): lr * min(1, (step + 1) / warmup_steps).
  int32_t warmup_steps = 0;
  // Version 3: from step decay_start on, the learning rate falls linearly to
  // decay_end x lr over decay_steps steps and stays there (0 steps: no decay).
  int64_t decay_start = 0;
  int64_t decay_steps = 0;
  float decay_end = 0.0f;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(kind, lr, momentum, nesterov, weight_decay, eps, initial_accumulator, beta1, beta2,
       ftrl_beta, ftrl_l1, ftrl_l2);
    if (version >= 2) ar(warmup_steps);
    if (version >= 3) ar(decay_start, decay_steps, decay_end);
  }
};

// The learning-rate multiplier of `step` (a worker clock) under the warm-up
// and the decay (1: neither; a negative step: not known, 1).
inline float LrScheduleScale(const OptimizerConfig& c, int64_t step) {
  if (step < 0) return 1.0f;
  float scale = 1.0f;
  if (c.warmup_steps > 0 && step + 1 < c.warmup_steps) {
    scale = static_cast<float>(step + 1) / static_cast<float>(c.warmup_steps);
  }
  if (c.decay_steps > 0 && step >= c.decay_start) {
    const double done = std::min(1.0, static_cast<double>(step - c.decay_start) /
                                          static_cast<double>(c.decay_steps));
    scale *= static_cast<float>(1.0 - done * (1.0 - c.decay_end));
  }
  return scale;
}

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

// Feature admission of a sparse table (version 3 of TableSpec): an id gets
// a row only once admitted; until then a pull reads zeros (nothing is
// stored) and its gradients are dropped; the admitting push creates the row
// with the initializer's value. An id is admitted by a push
// when the table's count-min sketch has seen it min_count times, or, when
// admit_probability < 1, by a coin drawn per (id, occurrence) with that
// probability. With min_count == 1 and admit_probability < 1 the coin alone
// decides (PERSIA's rule); with both set either admits. min_count == 1 and
// admit_probability == 1: every id is admitted at once (no sketch).
struct AdmissionConfig {
  uint32_t min_count = 1;           // [1, 65535]
  float admit_probability = 1.0f;   // (0, 1]
  uint64_t sketch_bytes = 1 << 20;  // count-min sketch budget per server shard part

  bool enabled() const { return min_count > 1 || admit_probability < 1.0f; }

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(min_count, admit_probability, sketch_bytes);
  }
};

// Eviction of a sparse table (version 4 of TableSpec): with max_rows, the
// server threads of a table hold at most ceil(max_rows / (servers x
// threads)) rows each; past it, after each push, the row a sample of rows
// judges the least recently (kLru) or least frequently (kLfu: fewest
// pushes, halved every 1024 steps without one, then the oldest) updated is
// dropped. With ttl_steps, a row no push has updated for that many steps
// (of the pushing workers' clock) is dropped by a sweep that runs a little
// after every push. Rows are created by pushes only (a pull of a missing
// row reads zeros). A dropped row reads as zeros again and
// its id goes through admission again. max_rows == 0 and ttl_steps == 0:
// rows are kept for ever.
enum class EvictPolicy : uint8_t {
  kLru = 0,
  kLfu = 1,
};

struct EvictionConfig {
  uint64_t max_rows = 0;   // rows of the table over all servers; 0: unbounded
  EvictPolicy policy = EvictPolicy::kLru;
  uint64_t ttl_steps = 0;  // 0: rows do not expire

  bool enabled() const { return max_rows > 0 || ttl_steps > 0; }

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t /*version*/) {
    ar(max_rows, policy, ttl_steps);
  }
};

// How a sparse table stores its embedding values (version 4 of TableSpec);
// optimizer state stays fp32. Pulls and pushes carry fp32 whatever the
// storage; fp16/bf16 values are rounded stochastically on update (so small
// updates are not lost on average) and to nearest on restore.
enum class RowDtype : uint8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kBfloat16 = 2,
};

// "fp32", "fp16", "bf16".
inline const char* RowDtypeName(RowDtype d) {
  switch (d) {
    case RowDtype::kFloat16:
      return "fp16";
    case RowDtype::kBfloat16:
      return "bf16";
    default:
      return "fp32";
  }
}
inline bool ParseRowDtype(std::string_view name, RowDtype* out) {
  for (RowDtype d : {RowDtype::kFloat32, RowDtype::kFloat16, RowDtype::kBfloat16}) {
    if (name == RowDtypeName(d)) {
      *out = d;
      return true;
    }
  }
  return false;
}

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
  AdmissionConfig admission;  // sparse tables only
  EvictionConfig eviction;    // sparse tables only
  RowDtype dtype = RowDtype::kFloat32;  // sparse tables only
  // Version 5, sparse tables only: a row no push has created reads as zeros
  // (an id never trained adds nothing to the model's output, in training,
  // evaluation and serving alike), and its first push creates it at the
  // initializer's value before applying the update. Off: a pull creates the
  // row at the initializer's value (a random row for an unseen id).
  bool zero_untrained = false;

  template <class Archive>
  void serialize(Archive& ar, std::uint32_t version) {
    ar(id, name, kind, size, dim, optimizer, init);
    if (version >= 2) ar(on_workers);
    if (version >= 3) ar(admission);
    if (version >= 4) ar(eviction, dtype);
    if (version >= 5) ar(zero_untrained);
  }
};

}  // namespace pstrain

CEREAL_CLASS_VERSION(pstrain::OptimizerConfig, 3);
CEREAL_CLASS_VERSION(pstrain::InitializerConfig, 1);
CEREAL_CLASS_VERSION(pstrain::AdmissionConfig, 1);
CEREAL_CLASS_VERSION(pstrain::EvictionConfig, 1);
CEREAL_CLASS_VERSION(pstrain::TableSpec, 5);
