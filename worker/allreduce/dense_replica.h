// DenseReplica: the dense tables a worker keeps itself in allreduce mode,
// with their optimizer state, and the bucketed all-reduce of their
// gradients.
//
// Gradients live in one flat buffer laid out in reverse table order (the
// order the backward pass finishes them), cut into buckets of about
// `bucket_bytes`. As the model reports each table's gradient final
// (GradRefs::on_ready), a bucket whose tables are all final is handed to a
// CollectiveQueue and summed among the workers while the backward pass goes
// on (overlap). Finish() adds the sample count, waits for every bucket and
// applies the optimizer with scale 1 / (total samples), so every replica
// takes the same step as one worker on the union of the batches.
// Workers may hold different numbers of batches: one out of data joins
// every later step with a zero gradient (FinishIdle) until the sums say
// that no worker has data left, so every replica makes the same calls.
// Not thread-safe: the trainer thread uses it (the queue runs the buckets).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/buffer.h"
#include "common/collective.h"
#include "common/optim/optimizer.h"
#include "common/table_spec.h"

namespace pstrain::worker {

namespace nn {
class Device;
}

struct DenseReplicaOptions {
  size_t bucket_bytes = 25 << 20;
  bool overlap = true;  // start buckets during the backward pass
  // When the collective works on GPU memory (NCCL): each bucket is copied to
  // this device, reduced there and copied back. Null: host memory (Gloo).
  // Used only from the collective queue's thread: give it its own Device.
  nn::Device* staging = nullptr;
};

class DenseReplica {
 public:
  // `tables` are the model's tables (only the dense ones on_workers are
  // kept); values start from their initializers. `collective` and `queue`
  // must outlive the replica.
  static absl::StatusOr<std::unique_ptr<DenseReplica>> Create(const std::vector<TableSpec>& tables,
                                                              DenseReplicaOptions options,
                                                              Collective* collective,
                                                              CollectiveQueue* queue);

  // Makes every replica start from rank `root`'s values.
  absl::Status Broadcast(int root);

  bool holds(uint32_t table) const { return table < slot_.size() && slot_[table] >= 0; }
  const float* params(uint32_t table) const { return tables_[slot_[table]].weights.data(); }
  float* grad(uint32_t table) { return flat_.data() + tables_[slot_[table]].grad_offset; }
  size_t num_buckets() const { return buckets_.size(); }
  const std::vector<uint32_t>& table_ids() const { return ids_; }

  // Starts a step: every bucket waits for its tables again.
  void BeginStep();
  // The model reports `table`'s gradient final.
  void OnReady(uint32_t table);
  // Sums the gradients and sample counts of all replicas, then applies the
  // optimizer. Returns the total samples of the step.
  absl::StatusOr<double> Finish(uint32_t num_samples, float lr_scale = 1.0f);
  // A step of a worker that has no data left: a zero gradient and no
  // samples, summed with the others' (BeginStep not needed). Returns the
  // total samples of the step (0 once no worker has data).
  absl::StatusOr<double> FinishIdle(float lr_scale = 1.0f);
  // How many workers trained a batch in the last Finish/FinishIdle step.
  int last_workers_with_data() const { return last_workers_with_data_; }

  // Seconds the last Finish() waited for communication after compute ended.
  double last_wait_seconds() const { return last_wait_seconds_; }

  // The replica's weights, optimizer state and steps as a checkpoint shard
  // image (common/checkpoint/shard_file.h), and back.
  absl::StatusOr<Buffer> SerializeState() const;
  absl::Status RestoreState(const Buffer& image);

  // Checkpoint access: weights, optimizer state, step of table `table`.
  std::vector<float>& weights(uint32_t table) { return tables_[slot_[table]].weights; }
  std::vector<float>& state(uint32_t table) { return tables_[slot_[table]].state; }
  uint64_t& step(uint32_t table) { return tables_[slot_[table]].step; }

 private:
  struct Table {
    TableSpec spec;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::vector<float> weights;
    std::vector<float> state;
    uint64_t step = 0;
    size_t grad_offset = 0;  // into flat_
    int bucket = 0;
  };
  struct Bucket {
    size_t begin = 0, end = 0;  // floats of flat_
    int tables = 0;             // tables in it
    int ready = 0;              // reported this step
    bool started = false;
    CollectiveQueue::Handle handle;
  };

  DenseReplica(DenseReplicaOptions options, Collective* collective, CollectiveQueue* queue)
      : options_(options), collective_(collective), queue_(queue) {}

 public:
  ~DenseReplica();

 private:
  void Start(Bucket& b);
  // Sums the buckets not started yet and waits for all; then applies the
  // summed gradient (none when no samples).
  absl::StatusOr<double> SumAndApply(float lr_scale);
  float& samples_slot() { return flat_[flat_.size() - 2]; }
  float& with_data_slot() { return flat_[flat_.size() - 1]; }

  DenseReplicaOptions options_;
  Collective* collective_;
  CollectiveQueue* queue_;
  std::vector<Table> tables_;
  std::vector<int> slot_;  // by table id: index into tables_, or -1
  std::vector<uint32_t> ids_;
  std::vector<Bucket> buckets_;
  // Gradients, then two slots: the step's sample count and the number of
  // workers that trained a batch in it (kSamplesSlot, kWithDataSlot from
  // the end).
  std::vector<float> flat_;
  float* device_flat_ = nullptr;  // staging copy on options_.staging
  double last_wait_seconds_ = 0;
  int last_workers_with_data_ = 0;
};

}  // namespace pstrain::worker
