#include "job/job_fields.h"

#include <algorithm>

namespace pstrain::job {
namespace {

constexpr uint8_t W = kWorker;
constexpr uint8_t S = kServer;
constexpr uint8_t C = kCoordinator;

const std::vector<JobField>& Table() {
  static const auto* fields = new std::vector<JobField>{
      // The cluster: who takes part, the mode and when pulls see pushes.
      {"cluster.servers", "servers", C},
      {"cluster.workers", "workers", C},
      {"cluster.mode", "mode", W},
      {"cluster.consistency", "consistency", C},
      {"cluster.staleness", "staleness", C},
      {"cluster.elastic_workers", "elastic_workers", C},
      {"cluster.recover_workers", "recover_workers", C},
      {"cluster.recover_servers", "recover_servers", C},
      {"cluster.server_threads", "server_threads", S},
      {"cluster.server_memory_budget", "server_memory_budget", S},
      {"cluster.heartbeat_interval", "heartbeat_interval", C},
      {"cluster.heartbeat_timeout", "heartbeat_timeout", C},
      {"cluster.join_timeout", "join_timeout", C},
      {"cluster.worker_timeout", "worker_timeout", C},
      {"cluster.recovery_timeout", "recovery_timeout", C},
      {"cluster.resume_timeout", "resume_timeout", C},
      {"cluster.dense_chunk", "dense_chunk", C},
      {"cluster.allreduce.bucket_mb", "bucket_mb", W},
      {"cluster.allreduce.overlap", "overlap", W},
      {"cluster.allreduce.algorithm", "allreduce_algorithm", W},
      {"cluster.allreduce.timeout", "collective_timeout", W},
      {"cluster.pipeline.stages", "stages", W},
      {"cluster.pipeline.replicas", "replicas", W},
      {"cluster.pipeline.microbatches", "microbatches", W},
      {"cluster.pipeline.tensor_parallel", "tensor_parallel", W},
      {"cluster.pipeline.schedule", "schedule", W},
      {"cluster.pipeline.stage_layers", "stage_layers", W},
      {"cluster.pipeline.timeout", "pipeline_timeout", W},
      {"cluster.pipeline.ping_timeout", "pipeline_ping_timeout", W},
      // The tables: "*" is every embedding table, "dense" the MLP tables.
      {"tables.*.dim", "embedding_dim", W},
      {"tables.*.hash_size", "hash_buckets", W},
      {"tables.*.optimizer", "optimizer", W},
      {"tables.*.lr", "lr", W},
      {"tables.*.momentum", "momentum", W},
      {"tables.*.initial_accumulator", "initial_accumulator", W},
      {"tables.*.weight_decay", "weight_decay", W},
      {"tables.*.dtype", "embedding_dtype", W},
      {"tables.*.init", "embedding_init", W},
      {"tables.*.untrained_rows", "untrained_rows", W},
      {"tables.*.admission.min_count", "min_count", W},
      {"tables.*.admission.probability", "admit_probability", W},
      {"tables.*.admission.sketch_bytes", "admission_sketch_bytes", W},
      {"tables.*.eviction.max_rows", "max_rows", W},
      {"tables.*.eviction.policy", "evict_policy", W},
      {"tables.*.eviction.ttl_steps", "ttl_steps", W},
      {"tables.*.tier.dir", "tier_dir", S},
      {"tables.*.tier.store", "tier_store", S},
      {"tables.dense.optimizer", "dense_optimizer", W},
      {"tables.dense.lr", "dense_lr", W},
      {"tables.dense.initial_accumulator", "dense_initial_accumulator", W},
      // Per-table weight decay (entries other than "*" and "dense") gathers
      // here; a file may also give it whole.
      {"tables.weight_decay_by_table", "table_weight_decay", W},
      {"tables.init_by_table", "table_init", W},
      // The model.
      {"model.name", "model", W},
      {"model.file", "model_file", W},
      {"model.graph", "model_graph", W},
      {"model.bottom_mlp", "bottom_mlp", W},
      {"model.top_mlp", "top_mlp", W},
      {"model.deep_mlp", "deep_mlp", W},
      {"model.cross_layers", "cross_layers", W},
      {"model.cross_rank", "cross_rank", W},
      {"model.tower_layers", "tower_layers", W},
      {"model.tower_width", "tower_width", W},
      {"model.dropout", "dropout", W},
      {"model.bias_init", "bias_init", W},
      // The data.
      {"data.schema", "schema", W},
      {"data.train", "train_data", W},
      {"data.eval", "eval_data", W},
      {"data.eval_meta", "eval_meta", W},
      {"data.format", "format", W},
      {"data.field_sep", "field_sep", W},
      {"data.header", "header", W},
      {"data.dense_fields", "dense_fields", W},
      {"data.sparse_fields", "sparse_fields", W},
      {"data.multi_hot_sep", "multi_hot_sep", W},
      {"data.max_line_bytes", "max_line_bytes", W},
      {"data.max_bad_lines_fraction", "max_bad_lines_fraction", W},
      {"data.shuffle_buffer", "shuffle_buffer", W},
      {"data.reader_threads", "reader_threads", W},
      {"data.stream.dir", "train_stream", W},
      {"data.stream.start", "stream_start", W},
      {"data.stream.end", "stream_end", W},
      {"data.stream.poll_secs", "stream_poll_secs", W},
      {"data.stream.idle_secs", "stream_idle_secs", W},
      // Training.
      {"train.batch_size", "batch_size", W},
      {"train.epochs", "epochs", W},
      {"train.max_steps", "max_steps", W},
      {"train.seed", "seed", W},
      {"train.device", "device", W},
      {"train.lr_scaling", "lr_scaling", W},
      {"train.warmup_steps", "warmup_steps", W},
      {"train.lr_decay.steps", "lr_decay_steps", W},
      {"train.lr_decay.start", "lr_decay_start", W},
      {"train.lr_decay.end", "lr_decay_end", W},
      {"train.log_every_secs", "log_every_secs", W},
      {"train.metrics_out", "metrics_out", W},
      {"train.push_partition_kb", "push_partition_kb", W},
      {"train.pull_dtype", "pull_dtype", W},
      // Evaluation.
      {"eval.every_steps", "eval_every_steps", W},
      {"eval.every_epochs", "eval_every_epochs", W},
      {"eval.keep_best", "keep_best", W},
      {"eval.early_stop_rounds", "early_stop_rounds", W},
      // Checkpoints (the coordinator's).
      {"checkpoint.dir", "checkpoint_dir", C},
      {"checkpoint.every_steps", "checkpoint_every_steps", C},
      {"checkpoint.every_secs", "checkpoint_every_secs", C},
      {"checkpoint.keep", "keep_checkpoints", C},
      {"checkpoint.restore", "restore", C},
      // The trained model and its exports.
      {"export.save_model", "save_model", W},
      {"export.dir", "export_dir", W},
      {"export.every_steps", "export_every_steps", W},
      {"export.every_secs", "export_every_secs", W},
      {"export.base_every", "export_base_every", W},
      {"export.keep_bases", "export_keep_bases", W},
  };
  return *fields;
}

}  // namespace

const std::vector<JobField>& JobFields() { return Table(); }

const JobField* FieldAtPath(absl::string_view path) {
  for (const JobField& f : Table()) {
    if (f.path == path) return &f;
  }
  return nullptr;
}

const JobField* FieldOfFlag(absl::string_view flag) {
  for (const JobField& f : Table()) {
    if (f.flag == flag) return &f;
  }
  return nullptr;
}

const std::vector<std::string>& JobSections() {
  static const auto* sections = new std::vector<std::string>{
      "cluster", "tables", "model", "data", "train", "eval", "checkpoint", "export"};
  return *sections;
}

absl::string_view NodeSettingReason(absl::string_view key) {
  static const char* const kNodeOwn[] = {"coordinator", "bind", "advertise_host", "rank",
                                         "node_id", "metrics_port", "http_host", "cpus",
                                         "log_level", "endpoint_file", "dashboard_port",
                                         "connect_timeout", "coordinator_timeout"};
  if (std::find(std::begin(kNodeOwn), std::end(kNodeOwn), key) != std::end(kNodeOwn)) {
    return "a node's own setting (its endpoint, rank, ports, CPUs, logging): give it as a flag "
           "or PSTRAIN_ variable of that process";
  }
  if (key == "auth" || key == "keys_dir") {
    return "security is each node's own (it needs its keys before it may ask the coordinator "
           "for the job): give --auth and --keys_dir to every process";
  }
  if (key == "new_job" || key == "continue_job") {
    return "a choice of one run, not of the job: give it as a flag";
  }
  return "";
}

}  // namespace pstrain::job
