// The estimates behind `pstrain plan`: for a model and a number of
// workers, every layout (R replicas x P stages x T tensor-parallel ranks,
// M micro-batches) of pipeline mode, with the memory each worker needs,
// the bytes it moves per step and a rough samples/s.
//
// Memory of the busiest worker of a layout, from the model's own tables
// and layer shapes (the same code that cuts the model for training):
//   weights     = 3 x the dense floats the worker pulls: the copy it
//                 computes with, the next pull being assembled, and that
//                 pull's received frames (worker/kv_client.cc), x 4 bytes;
//   gradients   = 1 x the same floats (the push is sent without a copy),
//                 plus stage 0's embedding rows and their gradients;
//   activations = the micro-batches the schedule keeps (1F1B: P - stage,
//                 GPipe: M) x the stage's hidden outputs, its input and
//                 output, plus one set of gradient scratch;
//   baseline    = the resident memory of a worker process before its
//                 model (libraries, BLAS, sockets, data reader): measured
//                 by `pstrain plan --trial_steps` (a one-step run of a tiny
//                 tower), otherwise `baseline_bytes`.
// The optimizer state (Adagrad: 1 float per weight, Adam: 2) lives on the
// parameter servers, not on the workers: it is reported per server.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/models/model.h"
#include "worker/pipeline/pipeline_options.h"

namespace pstrain::launcher {

struct PlanInputs {
  worker::ModelOptions model;
  int batch_size = 256;  // rows per step of each replica
  int workers = 1;
  int servers = 1;
  worker::PipeSchedule schedule = worker::PipeSchedule::k1F1B;
  std::string stage_layers;        // as --stage_layers (empty: balanced)
  double device_memory_bytes = 0;  // per worker; 0: no limit
  double bandwidth_bytes = 1e9;    // per worker, bytes/s
  double flops_per_worker = 1e10;  // FLOP/s one worker computes at
  double baseline_bytes = 24e6;    // per worker process
};

struct LayoutEstimate {
  int replicas = 1, stages = 1, tp = 1, microbatches = 1;
  // Per worker (the largest over the layout's workers), bytes.
  double weights = 0, gradients = 0, activations = 0, baseline = 0, total = 0;
  double optimizer_per_server = 0;  // on each parameter server
  // Bytes one worker sends + receives per step (the busiest), by kind.
  double comm_pipeline = 0, comm_tp = 0, comm_ps = 0;
  double comm_total() const { return comm_pipeline + comm_tp + comm_ps; }
  double step_seconds = 0;
  double samples_per_sec = 0;  // estimated
  bool feasible = true;
  std::string why_not;  // when not feasible
  // Filled by a trial run (NaN when not run).
  double measured_samples_per_sec = -1;
  double measured_peak = -1;  // the largest worker VmHWM, bytes
  std::string trial_error;
};

// Every layout with R x P x T == workers (P up to the tower's layers, T up
// to the narrowest split layer; M in {P, 2P, 4P} up to the batch, 1 when
// P == 1), sorted: feasible first, then by estimated samples/s.
absl::StatusOr<std::vector<LayoutEstimate>> EstimateLayouts(const PlanInputs& in);

// The estimate of one layout. InvalidArgument when the model cannot be cut
// so (e.g. more stages than layers).
absl::StatusOr<LayoutEstimate> EstimateLayout(const PlanInputs& in, int replicas, int stages,
                                              int tp, int microbatches);

// FLOP/s of this machine's BLAS on the calling thread (a short SGEMM run).
double MeasureFlops();

}  // namespace pstrain::launcher
