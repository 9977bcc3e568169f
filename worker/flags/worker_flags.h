// Worker flags (--model, --train_data, --lr, ...), defined once for every
// binary that runs a worker: pstrain_worker and `pstrain train`.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "job/flags/job_flag.h"
#include "worker/worker_app.h"

namespace pstrain::worker {

// The options the parsed flags describe; InvalidArgument for bad values.
absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags();
std::string LogLevelFlag();
// --cpus (common/cpu_affinity.h PinProcess).
std::string CpusFlag();
// Where this worker asks for its job: --coordinator, --connect_timeout.
job::JobSourceOptions JobSourceFromFlags(const CurveKeys& curve);
// The runtime of a worker that is a process of its own (pstrain_worker,
// `pstrain train`): ZeroMQ, and a Shutdown from the coordinator ends the
// process at once, with 0 when the job ended well and 3 otherwise.
WorkerRuntime ProcessRuntime();

// The data flags (flags/data_flags.cc: --train_data, --train_stream,
// --eval_data, --schema and the Criteo layout's) into o->train, with the
// model's field counts, widths and pooling. REQUIRES: o->mode and the
// model's own flags in o->train.model filled.
absl::Status TakeDataFlags(WorkerOptions* o);
// --model_file (flags/model_file_flags.cc): the network of a model file
// into o->train.model (its name, and its embedding_dim, which a schema's
// overrides). REQUIRES: o->mode filled; before TakeDataFlags.
absl::Status TakeModelFileFlag(WorkerOptions* o);
// A model file's widths against the job's columns (no-op without one),
// before anything starts. REQUIRES: TakeModelFileFlag and TakeDataFlags done.
absl::Status CheckModelGraph(const WorkerOptions& o);
// The export flags (flags/export_flags.cc) into o->train; called by
// WorkerOptionsFromFlags after --save_model, --keep_best and --mode.
absl::Status TakeExportFlags(WorkerOptions* o);
// --bias_init, --dropout, --table_weight_decay, --lr_decay_*, --untrained_rows
// into o (regularization_flags.cc). REQUIRES: the rest of o filled (the
// table names are checked against the model it describes).
absl::Status TakeRegularizationFlags(WorkerOptions* o);

}  // namespace pstrain::worker
