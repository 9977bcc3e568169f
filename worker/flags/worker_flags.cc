// The worker's flags, shared by pstrain_worker and `pstrain train`. Only
// binaries link this file (libraries never read flags).
#include "worker/flags/worker_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cluster/coordinator_client.h"
#include "common/cpu_affinity.h"
#include "common/edit_distance.h"
#include "common/status.h"
#include "model/models/model.h"
#include "worker/eval/best_round.h"
#include "worker/eval/eval_schedule.h"
#include "worker/pipeline/pipeline_model.h"
#include "worker/pipeline/schedule.h"

ABSL_FLAG(std::string, coordinator, "tcp://127.0.0.1:7000", "Endpoint of the job's coordinator.");
ABSL_FLAG(std::string, bind, "tcp://0.0.0.0:0", "Endpoint to listen on (port 0: any free port).");
ABSL_FLAG(std::string, advertise_host, "", "Host name others use to reach this node (default: hostname).");
ABSL_FLAG(int, rank, -1, "Worker rank to take (-1: the coordinator assigns one).");
ABSL_FLAG(double, connect_timeout, 60.0, "Seconds to keep retrying while the coordinator is unreachable.");
ABSL_FLAG(std::string, node_id, "",
          "A stable identity of this worker, e.g. its container's hostname (the same across "
          "restarts of one container): the coordinator maps a new identity to a free rank and the "
          "same identity to the same rank again, so a restarted worker is re-admitted to its rank "
          "(with --elastic_workers on the coordinator). Empty: none (--rank or the next free rank).");
ABSL_FLAG(double, coordinator_timeout, 120.0,
          "When the coordinator stops answering (heartbeats unanswered for 10 intervals, at least "
          "2 s), keep this worker's state and register again with its rank for up to this many "
          "seconds, so a restarted coordinator (one with a --checkpoint_dir journal) takes the job "
          "back; then fail (exit 3) naming why. Meanwhile pstrain health reports it unhealthy.");

ABSL_FLAG(std::string, mode, "ps",
          "ps: every table on the parameter servers. allreduce: dense (MLP) tables replicated on "
          "the workers and their gradients summed by a collective (Gloo on CPUs), embeddings on "
          "the servers.");
ABSL_FLAG(double, bucket_mb, 25, "allreduce: size of the gradient buckets in MiB.");
ABSL_FLAG(bool, overlap, true, "allreduce: start each bucket during the backward pass.");
ABSL_FLAG(std::string, allreduce_algorithm, "bcube",
          "allreduce on CPUs (Gloo): bcube (recursive halving and doubling: log2(W) steps each "
          "way, for W workers a power of two) or ring (2(W-1) steps each way; each step is a "
          "transfer with its wake-ups, so bcube is faster for small dense tables and slow hosts).");
ABSL_FLAG(double, collective_timeout, 60, "allreduce: seconds before a collective call fails.");
ABSL_FLAG(std::string, model, "dlrm",
          "Model: lr | wide_deep | dlrm | deep_tower | dcn_v2 (DLRM with DCN-v2 cross layers "
          "instead of the dot interaction, as MLPerf's DLRM-DCNv2) | deepfm (FM + deep tower "
          "over shared embeddings).");
ABSL_FLAG(int, embedding_dim, 16, "Embedding width (every model but lr).");
ABSL_FLAG(std::string, bottom_mlp, "64,16",
          "dlrm, dcn_v2: widths of the bottom MLP over the dense features (dlrm: last = "
          "embedding_dim).");
ABSL_FLAG(std::string, top_mlp, "64,32",
          "dlrm, dcn_v2: widths of the top MLP (a final 1-wide layer is added).");
ABSL_FLAG(std::string, deep_mlp, "256,128",
          "wide_deep, deep_tower, deepfm: widths of the hidden layers of the deep tower.");
ABSL_FLAG(int, cross_layers, 3, "dcn_v2: cross layers over [bottom MLP output | embeddings].");
ABSL_FLAG(int, cross_rank, 64,
          "dcn_v2: rank of each cross layer's weight (W = U V, U and V of this rank; 0: full "
          "rank, a width x width matrix).");
ABSL_FLAG(int, tower_layers, 0,
          "deep_tower: hidden layers of the tower, each --tower_width wide (0: use --deep_mlp).");
ABSL_FLAG(int, tower_width, 1024, "deep_tower: width of each of the --tower_layers.");
ABSL_FLAG(int, stages, 1, "pipeline: stages per pipeline (workers per replica).");
ABSL_FLAG(int, replicas, 1, "pipeline: pipelines side by side (the job has replicas x stages workers).");
ABSL_FLAG(int, microbatches, 4, "pipeline: micro-batches each batch is cut into.");
ABSL_FLAG(int, tensor_parallel, 1,
          "pipeline: workers per stage, each holding a slice of the stage's tower layers "
          "(the job has replicas x stages x tensor_parallel workers).");
ABSL_FLAG(std::string, schedule, "1f1b",
          "pipeline: gpipe (all forwards, then all backwards) | 1f1b (one forward, one backward).");
ABSL_FLAG(std::string, stage_layers, "",
          "pipeline: tower layers of each stage, e.g. 0-11,12-24 (empty: balanced by cost).");
ABSL_FLAG(double, pipeline_timeout, 300,
          "pipeline: seconds a stage waits for a neighbour that is alive but sends nothing.");
ABSL_FLAG(double, pipeline_ping_timeout, 15,
          "pipeline: a silent neighbour is pinged every second; no answer within this many "
          "seconds stops the stage with an error naming it.");
ABSL_FLAG(std::string, optimizer, "adagrad", "Server-side optimizer: sgd | adagrad | rowwise_adagrad | adam | ftrl.");
ABSL_FLAG(double, lr, -1,
          "Learning rate of the embedding tables (default 0.05; deepfm 0.01: its FM logit sums "
          "every pair of fields' dot products, so one step moves it about fields^2 times more).");
ABSL_FLAG(std::string, dense_optimizer, "", "Optimizer of the dense (MLP) tables (default: --optimizer).");
ABSL_FLAG(double, dense_lr, -1,
          "Learning rate of the dense (MLP) tables (default: --lr / 5: shared weights take every "
          "sample's gradient, embedding rows only their ids').");
ABSL_FLAG(double, momentum, 0, "SGD momentum.");
ABSL_FLAG(double, initial_accumulator, 0,
          "Adagrad: starting value of the squared-gradient sums of the embedding tables (0: the "
          "first update of a new row moves it by lr, which rare ids need).");
ABSL_FLAG(double, dense_initial_accumulator, 0,
          "Adagrad: starting value of the squared-gradient sums of the dense (MLP) tables.");
ABSL_FLAG(double, weight_decay, 0,
          "L2 weight decay of every table (sgd, adagrad, adam; applied to an embedding row when a "
          "push updates it).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of parameter initialization and shuffling.");
ABSL_FLAG(std::string, device, "auto", "cpu | cuda | auto (a GPU when there is one).");

ABSL_FLAG(int, batch_size, 1024, "Rows per step on each worker.");
ABSL_FLAG(int, epochs, 1, "Passes over the training data.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps (0: run the epochs).");
ABSL_FLAG(int64_t, shuffle_buffer, 0, "Rows in the shuffle window (0: file order).");
ABSL_FLAG(double, max_bad_lines_fraction, 0.01, "Fail when more than this fraction of lines is malformed.");
ABSL_FLAG(int64_t, eval_every_steps, 0,
          "Evaluate --eval_data every N steps (0: only at the end). Workers whose data ends "
          "sooner have their share of the evaluation scored by the lead worker.");
ABSL_FLAG(int, eval_every_epochs, 0,
          "Evaluate --eval_data at the end of every N epochs (0: only at the end; the last "
          "epoch's end is the final evaluation). Instead of --eval_every_steps.");
ABSL_FLAG(std::string, lr_scaling, "none",
          "none | linear: multiply every table's learning rate by the number of workers (the "
          "global batch grows with them).");
ABSL_FLAG(int32_t, warmup_steps, 0,
          "Ramp every learning rate up linearly over the first N steps (0: none); applied by the "
          "servers (and the dense replica in allreduce mode) at each step.");
ABSL_FLAG(int32_t, min_count, 1,
          "Feature admission for every sparse (embedding) table: an id gets a row only after "
          "this many pushes carry it (1: at once); until then it reads as zeros and "
          "its gradients are dropped.");
ABSL_FLAG(double, admit_probability, 1.0,
          "Feature admission for every sparse table: each push of an id without a row admits it "
          "with this probability (deterministic per id and occurrence), in (0, 1]; with "
          "--min_count > 1 either rule admits.");
ABSL_FLAG(int64_t, admission_sketch_bytes, 1 << 20,
          "Memory of each sparse table's admission count sketch on each server thread, in "
          "bytes (with --min_count > 1 or --admit_probability < 1).");
ABSL_FLAG(int64_t, max_rows, 0,
          "Eviction for every sparse (embedding) table: keep at most this many rows of each "
          "table over all servers (split evenly between their threads), dropping the least "
          "recently or least frequently updated (--evict_policy) after each request; 0: "
          "unbounded.");
ABSL_FLAG(std::string, evict_policy, "lru",
          "Which rows --max_rows drops: lru (least recently updated) or lfu (fewest updates, "
          "then least recently).");
ABSL_FLAG(int64_t, ttl_steps, 0,
          "Eviction for every sparse table: drop a row that no push has updated for this many "
          "steps (0: never). A dropped row reads as zeros again and goes through admission again.");
ABSL_FLAG(std::string, embedding_dtype, "fp32",
          "How the servers store every sparse table's values: fp32, fp16 or bf16 (half the "
          "memory; optimizer state stays fp32; updates rounded stochastically).");
ABSL_FLAG(double, log_every_secs, 5,
          "Seconds between progress lines (step, epoch, the job's samples/s estimated from the "
          "lead's, the share of time waiting for data when over 5 %, loss, ETA, the latest "
          "evaluation) and progress records in --metrics_out.");
ABSL_FLAG(std::string, metrics_out, "", "Append JSON lines (progress, eval, summary) to this file (worker 0).");
ABSL_FLAG(std::string, save_model, "",
          "Worker 0 exports the trained model to this folder (read by `pstrain predict`).");
// Keeping the best model and stopping early (TrainOptions::keep_best).
ABSL_FLAG(std::string, keep_best, "",
          "eval_auc | eval_logloss: --save_model holds the model of the evaluation round that "
          "scored best by this metric (higher AUC, lower log loss), not the last one. Each "
          "round that improves on the best so far exports the model there (to DIR.tmp, then "
          "swapped in whole); its manifest records the round, step and metrics. Needs "
          "--eval_data and --save_model; without --eval_every_steps or --eval_every_epochs it "
          "evaluates every epoch. A bare --keep_best means eval_auc. A model file of several "
          "heads: HEAD.eval_auc or HEAD.eval_logloss follows that head (default: the first "
          "head's). Empty: off, the last model is saved.");
ABSL_FLAG(int, early_stop_rounds, 0,
          "Stop training, every worker at the same step, when the evaluation metric (that of "
          "--keep_best, else eval_auc) has not improved for this many evaluations in a row; "
          "the final evaluation and the summary follow as usual. Needs --eval_data (rounds: "
          "--eval_every_steps or --eval_every_epochs, else every epoch). 0: off.");
ABSL_FLAG(int, metrics_port, 0, "Serve Prometheus metrics at http://HOST:PORT/metrics (0: off).");
ABSL_FLAG(std::string, cpus, "", pstrain::kCpusFlagHelp);
ABSL_FLAG(int, push_partition_kb, 1024,
          "A server's share of a dense gradient larger than this goes in pieces of at most this "
          "many KiB, so that the server applies one piece while the next arrives (0: one message).");
ABSL_FLAG(std::string, pull_dtype, "fp32",
          "fp32 | fp16: the precision of the values the servers send this worker's pulls (rows "
          "and dense tables). fp16 halves those bytes; the model computes with them widened "
          "back to fp32, and the servers keep and update fp32.");
ABSL_FLAG(std::string, http_host, "0.0.0.0", "Address the --metrics_port server listens on.");
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");

namespace pstrain::worker {
namespace {


absl::StatusOr<std::vector<int>> ParseWidths(const std::string& flag, const std::string& text) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int v = 0;
    if (!absl::SimpleAtoi(part, &v) || v <= 0) {
      return absl::InvalidArgumentError("--" + flag + ": '" + text + "' is not a list of positive widths");
    }
    out.push_back(v);
  }
  return out;
}

absl::StatusOr<OptimizerKind> ParseOptimizer(std::string name) {
  name = absl::AsciiStrToLower(name);
  if (name == "sgd") return OptimizerKind::kSgd;
  if (name == "adagrad") return OptimizerKind::kAdagrad;
  if (name == "rowwise_adagrad") return OptimizerKind::kRowwiseAdagrad;
  if (name == "adam") return OptimizerKind::kAdam;
  if (name == "ftrl") return OptimizerKind::kFtrl;
  return absl::InvalidArgumentError("unknown optimizer '" + name +
                                    "' (sgd, adagrad, rowwise_adagrad, adam, ftrl)");
}

// --keep_best and --early_stop_rounds, checked against the evaluation and
// export flags already in `o`.
absl::Status TakeKeepBestFlags(WorkerOptions* o) {
  TrainOptions& t = o->train;
  if (std::string name = absl::GetFlag(FLAGS_keep_best); !name.empty()) {
    if (name == "true" || name == "1") name = "eval_auc";  // a bare --keep_best
    // "convert.eval_auc": a head's, as --metrics_out names it.
    if (const size_t dot = name.rfind('.'); dot != std::string::npos) {
      t.keep_best_head = name.substr(0, dot);
      name = name.substr(dot + 1);
    }
    absl::StatusOr<EvalMetric> metric = ParseEvalMetric(name);
    if (!metric.ok()) return Annotate(metric.status(), "--keep_best");
    t.keep_best = *metric;
    if (!t.keep_best_head.empty()) {
      std::vector<std::string> heads;
      if (t.model.graph != nullptr) {
        for (const graph::HeadSpec& h : t.model.graph->heads) heads.push_back(h.name);
      }
      if (std::find(heads.begin(), heads.end(), t.keep_best_head) == heads.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--keep_best=", absl::GetFlag(FLAGS_keep_best), ": ",
            heads.empty() ? "names a head, but the model has one (--keep_best=eval_auc)"
                          : absl::StrCat("no head \"", t.keep_best_head, "\"",
                                         DidYouMeanQuoted(t.keep_best_head, heads), " (heads: ",
                                         absl::StrJoin(heads, ", "), ")")));
      }
    }
  }
  t.early_stop_rounds = absl::GetFlag(FLAGS_early_stop_rounds);
  if (t.early_stop_rounds < 0) {
    return absl::InvalidArgumentError("--early_stop_rounds must be >= 0 (0: off)");
  }
  PS_RETURN_IF_ERROR(TakeExportFlags(o));
  const bool keep_best = t.keep_best.has_value();
  const bool early_stop = t.early_stop_rounds > 0;
  if (!keep_best && !early_stop) return absl::OkStatus();
  if (o->mode == TrainMode::kPipeline) {
    return absl::InvalidArgumentError(
        "--keep_best and --early_stop_rounds are not supported in --mode=pipeline");
  }
  if (keep_best && (t.eval_data.empty() || t.save_model.empty())) {
    return absl::InvalidArgumentError(
        "--keep_best needs --eval_data (to score the rounds) and --save_model (where the best "
        "round's model is kept)");
  }
  if (early_stop && t.eval_data.empty()) {
    return absl::InvalidArgumentError(
        "--early_stop_rounds needs --eval_data (the evaluations it counts)");
  }
  if (t.eval_every_steps <= 0 && t.eval_every_epochs <= 0) {
    if (t.epochs <= 1 && early_stop) {
      return absl::InvalidArgumentError(
          "--early_stop_rounds needs evaluation rounds: --eval_every_steps, --eval_every_epochs, "
          "or --epochs > 1 (then every epoch)");
    }
    // Rounds to compare: one at every epoch's end.
    if (t.epochs > 1) t.eval_every_epochs = 1;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WorkerOptions> WorkerOptionsFromFlags() {
  WorkerOptions o;
  o.coordinator = absl::GetFlag(FLAGS_coordinator);
  o.bind = absl::GetFlag(FLAGS_bind);
  o.advertise_host = absl::GetFlag(FLAGS_advertise_host);
  o.rank = absl::GetFlag(FLAGS_rank);
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
  o.node_id = absl::GetFlag(FLAGS_node_id);
  o.coordinator_timeout = absl::Seconds(absl::GetFlag(FLAGS_coordinator_timeout));
  if (!(o.coordinator_timeout > absl::ZeroDuration())) {
    return absl::InvalidArgumentError("--coordinator_timeout must be positive");
  }
  PS_ASSIGN_OR_RETURN(o.mode, ParseTrainMode(absl::GetFlag(FLAGS_mode)));
  double bucket_mb = absl::GetFlag(FLAGS_bucket_mb);
  if (!(bucket_mb > 0)) return absl::InvalidArgumentError("--bucket_mb must be positive");
  o.bucket_bytes = static_cast<size_t>(bucket_mb * (1 << 20));
  o.allreduce_algorithm = absl::GetFlag(FLAGS_allreduce_algorithm);
  if (o.allreduce_algorithm != "bcube" && o.allreduce_algorithm != "ring") {
    return absl::InvalidArgumentError(absl::StrCat("--allreduce_algorithm=", o.allreduce_algorithm,
                                                   ": expected bcube or ring"));
  }
  o.overlap = absl::GetFlag(FLAGS_overlap);
  o.collective_timeout = absl::Seconds(absl::GetFlag(FLAGS_collective_timeout));
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  if (absl::GetFlag(FLAGS_push_partition_kb) < 0) {
    return absl::InvalidArgumentError("--push_partition_kb must not be negative");
  }
  o.push_partition_bytes = uint64_t{1024} * static_cast<uint64_t>(absl::GetFlag(FLAGS_push_partition_kb));
  if (absl::GetFlag(FLAGS_pull_dtype) != "fp32" && absl::GetFlag(FLAGS_pull_dtype) != "fp16") {
    return absl::InvalidArgumentError(
        absl::StrCat("--pull_dtype=", absl::GetFlag(FLAGS_pull_dtype), ": want fp32 or fp16"));
  }
  o.pull_f16 = absl::GetFlag(FLAGS_pull_dtype) == "fp16";
  o.http_host = absl::GetFlag(FLAGS_http_host);
  if (o.metrics_port < 0 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError("--metrics_port must be in 0..65535");
  }
  TrainOptions& t = o.train;
  ModelOptions& m = t.model;
  m.name = absl::GetFlag(FLAGS_model);
  PS_RETURN_IF_ERROR(Annotate(CheckModelName(m.name), "--model"));
  m.embedding_dim = absl::GetFlag(FLAGS_embedding_dim);
  // A model file's network (its name, which picks the default --lr below).
  PS_RETURN_IF_ERROR(TakeModelFileFlag(&o));
  PS_ASSIGN_OR_RETURN(m.bottom_mlp, ParseWidths("bottom_mlp", absl::GetFlag(FLAGS_bottom_mlp)));
  PS_ASSIGN_OR_RETURN(m.top_mlp, ParseWidths("top_mlp", absl::GetFlag(FLAGS_top_mlp)));
  PS_ASSIGN_OR_RETURN(m.deep_mlp, ParseWidths("deep_mlp", absl::GetFlag(FLAGS_deep_mlp)));
  m.cross_layers = absl::GetFlag(FLAGS_cross_layers);
  m.cross_rank = absl::GetFlag(FLAGS_cross_rank);
  if (m.cross_layers < 1 || m.cross_rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--cross_layers must be >= 1 and --cross_rank >= 0 (0: full rank); got ",
                     m.cross_layers, " and ", m.cross_rank));
  }
  if (int layers = absl::GetFlag(FLAGS_tower_layers); layers != 0) {
    int width = absl::GetFlag(FLAGS_tower_width);
    if (layers < 0 || width < 1) {
      return absl::InvalidArgumentError("--tower_layers and --tower_width must be positive");
    }
    m.deep_mlp.assign(layers, width);
  }
  PipelineOptions& p = o.pipeline;
  p.stages = absl::GetFlag(FLAGS_stages);
  p.replicas = absl::GetFlag(FLAGS_replicas);
  p.microbatches = absl::GetFlag(FLAGS_microbatches);
  p.tensor_parallel = absl::GetFlag(FLAGS_tensor_parallel);
  if (p.tensor_parallel < 1) return absl::InvalidArgumentError("--tensor_parallel must be >= 1");
  if (p.stages < 1 || p.replicas < 1 || p.microbatches < 1) {
    return absl::InvalidArgumentError("--stages, --replicas and --microbatches must be >= 1");
  }
  PS_ASSIGN_OR_RETURN(p.schedule, ParseSchedule(absl::GetFlag(FLAGS_schedule)));
  p.stage_layers = absl::GetFlag(FLAGS_stage_layers);
  p.timeout = absl::Seconds(absl::GetFlag(FLAGS_pipeline_timeout));
  p.ping_timeout = absl::Seconds(absl::GetFlag(FLAGS_pipeline_ping_timeout));
  if (p.timeout <= absl::ZeroDuration() || p.ping_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--pipeline_timeout and --pipeline_ping_timeout must be positive");
  }
  m.seed = absl::GetFlag(FLAGS_seed);
  m.device = absl::GetFlag(FLAGS_device);
  PS_ASSIGN_OR_RETURN(m.sparse_optimizer.kind, ParseOptimizer(absl::GetFlag(FLAGS_optimizer)));
  const double lr = absl::GetFlag(FLAGS_lr);
  m.sparse_optimizer.lr = static_cast<float>(lr != -1 ? lr : m.name == "deepfm" ? 0.01 : 0.05);
  m.sparse_optimizer.momentum = static_cast<float>(absl::GetFlag(FLAGS_momentum));
  m.sparse_optimizer.weight_decay = static_cast<float>(absl::GetFlag(FLAGS_weight_decay));
  m.sparse_optimizer.initial_accumulator = static_cast<float>(absl::GetFlag(FLAGS_initial_accumulator));
  m.dense_optimizer = m.sparse_optimizer;
  if (std::string d = absl::GetFlag(FLAGS_dense_optimizer); !d.empty()) {
    PS_ASSIGN_OR_RETURN(m.dense_optimizer.kind, ParseOptimizer(d));
  }
  m.dense_optimizer.lr = m.sparse_optimizer.lr / 5;
  if (double lr = absl::GetFlag(FLAGS_dense_lr); lr >= 0) m.dense_optimizer.lr = static_cast<float>(lr);
  m.dense_optimizer.initial_accumulator =
      static_cast<float>(absl::GetFlag(FLAGS_dense_initial_accumulator));
  if (!(m.sparse_optimizer.lr > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--lr must be positive, not ", lr));
  }

  PS_RETURN_IF_ERROR(TakeDataFlags(&o));
  PS_RETURN_IF_ERROR(CheckModelGraph(o));
  if (o.mode == TrainMode::kPipeline) {
    PS_RETURN_IF_ERROR(Annotate(CheckPipelineModel(m), "--mode=pipeline"));
  }
  t.batch_size = absl::GetFlag(FLAGS_batch_size);
  if (t.batch_size < 1) return absl::InvalidArgumentError("--batch_size must be >= 1");
  t.epochs = absl::GetFlag(FLAGS_epochs);
  if (t.epochs < 1) return absl::InvalidArgumentError("--epochs must be >= 1");
  t.max_steps = absl::GetFlag(FLAGS_max_steps);
  t.shuffle_buffer = static_cast<size_t>(std::max<int64_t>(0, absl::GetFlag(FLAGS_shuffle_buffer)));
  t.seed = m.seed;
  t.max_bad_lines_fraction = absl::GetFlag(FLAGS_max_bad_lines_fraction);
  t.eval_every_steps = absl::GetFlag(FLAGS_eval_every_steps);
  t.eval_every_epochs = absl::GetFlag(FLAGS_eval_every_epochs);
  PS_RETURN_IF_ERROR(EvalSchedule::Check(t.eval_every_steps, t.eval_every_epochs));
  if (t.eval_every_epochs > 0 && o.mode == TrainMode::kPipeline) {
    return absl::InvalidArgumentError("--eval_every_epochs is not built for --mode=pipeline "
                                      "(use --eval_every_steps)");
  }
  if (t.eval_every_epochs > 0 && !t.train_stream.dir.empty()) {
    return absl::InvalidArgumentError("--eval_every_epochs: a --train_stream has no epochs (use "
                                      "--eval_every_steps)");
  }
  t.lr_scaling = absl::GetFlag(FLAGS_lr_scaling);
  if (t.lr_scaling != "none" && t.lr_scaling != "linear") {
    return absl::InvalidArgumentError("--lr_scaling must be none or linear");
  }
  t.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  if (t.warmup_steps < 0) return absl::InvalidArgumentError("--warmup_steps must be >= 0");
  const int32_t min_count = absl::GetFlag(FLAGS_min_count);
  if (min_count < 1 || min_count > UINT16_MAX) {
    return absl::InvalidArgumentError("--min_count must be in [1, 65535]");
  }
  t.admission.min_count = static_cast<uint32_t>(min_count);
  const double admit_probability = absl::GetFlag(FLAGS_admit_probability);
  if (!(admit_probability > 0.0 && admit_probability <= 1.0)) {
    return absl::InvalidArgumentError("--admit_probability must be in (0, 1]");
  }
  t.admission.admit_probability = static_cast<float>(admit_probability);
  const int64_t sketch_bytes = absl::GetFlag(FLAGS_admission_sketch_bytes);
  if (sketch_bytes < 512 || sketch_bytes > (int64_t{1} << 34)) {
    return absl::InvalidArgumentError("--admission_sketch_bytes must be in [512, 16 GiB]");
  }
  t.admission.sketch_bytes = static_cast<uint64_t>(sketch_bytes);
  const int64_t max_rows = absl::GetFlag(FLAGS_max_rows);
  if (max_rows < 0) return absl::InvalidArgumentError("--max_rows must be >= 0 (0: unbounded)");
  t.eviction.max_rows = static_cast<uint64_t>(max_rows);
  const std::string policy = absl::GetFlag(FLAGS_evict_policy);
  if (policy == "lru") {
    t.eviction.policy = EvictPolicy::kLru;
  } else if (policy == "lfu") {
    t.eviction.policy = EvictPolicy::kLfu;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--evict_policy=", policy, ": want lru or lfu"));
  }
  const int64_t ttl_steps = absl::GetFlag(FLAGS_ttl_steps);
  if (ttl_steps < 0 || ttl_steps > (int64_t{1} << 31) - 1) {
    return absl::InvalidArgumentError("--ttl_steps must be in [0, 2^31 - 1] (0: never)");
  }
  t.eviction.ttl_steps = static_cast<uint64_t>(ttl_steps);
  const std::string dtype = absl::GetFlag(FLAGS_embedding_dtype);
  if (!ParseRowDtype(dtype, &t.embedding_dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--embedding_dtype=", dtype, ": want fp32, fp16 or bf16"));
  }
  t.log_every = absl::Seconds(absl::GetFlag(FLAGS_log_every_secs));
  t.metrics_out = absl::GetFlag(FLAGS_metrics_out);
  t.save_model = absl::GetFlag(FLAGS_save_model);
  PS_RETURN_IF_ERROR(TakeKeepBestFlags(&o));
  t.progress_bar = isatty(STDERR_FILENO) != 0;
  PS_RETURN_IF_ERROR(TakeRegularizationFlags(&o));
  return o;
}


std::string LogLevelFlag() { return absl::GetFlag(FLAGS_log_level); }
job::JobSourceOptions JobSourceFromFlags(const CurveKeys& curve) {
  job::JobSourceOptions o;
  o.coordinator = absl::GetFlag(FLAGS_coordinator);
  o.curve = curve;
  o.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
  return o;
}

std::string CpusFlag() { return absl::GetFlag(FLAGS_cpus); }

WorkerRuntime ProcessRuntime() {
  WorkerRuntime runtime;
  runtime.on_shutdown = [](const absl::Status& why) {
    std::_Exit(why.ok() || IsNothingLeftToDo(why) ? 0 : 3);
  };
  return runtime;
}

}  // namespace pstrain::worker
