// pstrain gen: synthetic Criteo-format data from a hidden teacher model.
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/file_util.h"
#include "common/json_line.h"
#include "common/status.h"
#include "data/synthetic.h"
#include "data/synthetic_history.h"
#include "launcher/args.h"
#include "launcher/commands.h"

namespace pstrain::launcher {

namespace {

FlagSet GenFlags() {
  FlagSet flags;
  flags.Define("rows", "100000", "Rows to write.")
      .Define("out", "", "Output file (Criteo TSV); OUT.meta.json gets the report.")
      .Define("seed", "1", "Seed of the world (teacher and distributions). Train and eval files "
                           "of one world share the seed and use disjoint --first_row ranges.")
      .Define("first_row", "0", "Index of the first row to write.")
      .Define("dense_fields", "13", "Integer columns.")
      .Define("sparse_fields", "26", "Categorical columns.")
      .Define("zipf", "1.1", "Zipf exponent of the categorical values.")
      .Define("positive_rate", "0.25", "Target click rate.")
      .Define("new_id_rate", "0", "Fraction of categorical tokens that are fresh values never "
                                  "seen before (a growing, long-tailed id space; 0: none).")
      .Define("stream", "", "Write a stream of partitions into this folder instead of --out: "
                            "DIR/YYYY-MM-DD/HH/part-0.tsv and a _SUCCESS marker each, --rows "
                            "rows per partition, one hour apart by name; a partition already "
                            "complete is kept (a restarted writer goes on where it stopped).")
      .Define("partitions", "10", "--stream: partitions to write.")
      .Define("stream_from", "2026-12-01T00", "--stream: the first partition's hour (UTC).")
      .Define("drift", "0", "--stream: fraction of every field's values that turn into new ids "
                            "(with new teacher weights) from one partition to the next.")
      .Define("interval_secs", "0", "--stream: seconds between partitions (0: all at once).")
      .Define("history", "0",
              "Write behaviour-history data instead (CSV: clicked, age, price, user, item, "
              "history): history lists up to this many items the user clicked before, and the "
              "click depends on whether the candidate item's topic is among the recent ones "
              "(a DIN-style teacher; OUT.schema.json reads it). 0: the Criteo-layout world.")
      .Define("tasks", "1",
              "--history: 2 adds a second label after the click, \"converted\" (0/1 on clicked "
              "rows, empty on the others), for multi-task models (examples/models/mmoe.json).");
  return flags;
}

// A report's JSON line, the meta file's.
JsonLine MetaLine(const worker::SyntheticOptions& o, const worker::SyntheticReport& report) {
  JsonLine meta;
  meta.Add("rows", report.rows)
      .Add("seed", static_cast<int64_t>(o.seed))
      .Add("first_row", o.first_row)
      .Add("positive_rate", report.positive_rate)
      .Add("oracle_auc", report.oracle_auc)
      .Add("oracle_logloss", report.oracle_logloss)
      .Add("bytes", static_cast<int64_t>(report.bytes));
  if (o.new_id_rate > 0) meta.Add("new_id_rate", o.new_id_rate);  // default: as before
  if (o.drift > 0) meta.Add("drift", o.drift).Add("era", o.era);
  return meta;
}

// --stream: partition k holds rows [first_row + k*rows, ...) of era k, then
// its _SUCCESS marker (after the data is renamed into place).
absl::Status WriteStream(const FlagSet& flags, worker::SyntheticOptions o, const std::string& dir) {
  PS_ASSIGN_OR_RETURN(int64_t partitions, flags.GetInt("partitions"));
  PS_ASSIGN_OR_RETURN(double drift, flags.GetDouble("drift"));
  PS_ASSIGN_OR_RETURN(double interval, flags.GetDouble("interval_secs"));
  if (partitions < 1 || partitions > 100000) return UsageError("--partitions must be in 1..100000");
  if (!(interval >= 0)) return UsageError("--interval_secs must be >= 0");
  absl::Time from;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%dT%H", flags.Get("stream_from"), absl::UTCTimeZone(), &from, &err)) {
    return UsageError(absl::StrCat("--stream_from=", flags.Get("stream_from"),
                                   ": want YYYY-MM-DDTHH (", err, ")"));
  }
  o.drift = drift;
  const int64_t first = o.first_row;
  bool wrote = false;
  for (int64_t k = 0; k < partitions; ++k) {
    const std::string name = absl::FormatTime("%Y-%m-%d/%H", from + absl::Hours(k), absl::UTCTimeZone());
    const std::string folder = absl::StrCat(dir, "/", name);
    if (std::error_code ec; std::filesystem::exists(folder + "/_SUCCESS", ec)) {
      // A restarted writer keeps what it wrote: a trainer may have read it.
      std::printf("partition %s: already complete, kept\n", name.c_str());
      std::fflush(stdout);
      continue;
    }
    if (wrote && interval > 0) absl::SleepFor(absl::Seconds(interval));
    wrote = true;
    PS_RETURN_IF_ERROR(MakeDirs(folder));
    o.era = k;
    o.first_row = first + k * o.rows;
    PS_ASSIGN_OR_RETURN(auto report, worker::WriteSynthetic(o, folder + "/part-0.tsv"));
    PS_RETURN_IF_ERROR(WriteFileAtomically(folder + "/_meta.json", MetaLine(o, report).str() + "\n"));
    PS_RETURN_IF_ERROR(WriteFileAtomically(folder + "/_SUCCESS", ""));
    std::printf("partition %s: %lld rows, oracle AUC %.4f\n", name.c_str(),
                static_cast<long long>(report.rows), report.oracle_auc);
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace

std::string GenHelp() {
  return absl::StrCat(
      "usage: pstrain gen --rows=N --out=FILE [--seed=K] [--first_row=R]\n"
      "       pstrain gen --rows=N --out=FILE --history=L   (behaviour histories, CSV)\n"
      "       pstrain gen --rows=N --stream=DIR [--partitions=P] [--drift=D] [--interval_secs=S]\n\n"
      "Writes synthetic click data (label, 13 integer, 26 categorical columns) drawn from a\n"
      "hidden teacher: per-value weights, non-linear effects of the integers, and pairwise\n"
      "interactions between fields that a linear model cannot express. Prints the teacher's\n"
      "oracle AUC on the rows written: the best any model can do on this file.\n\n",
      GenFlags().Help());
}

absl::Status RunGen(const std::vector<std::string>& argv) {
  FlagSet flags = GenFlags();
  PS_RETURN_IF_ERROR(flags.Parse(argv, /*keep_unknown=*/false).status());
  worker::SyntheticOptions o;
  PS_ASSIGN_OR_RETURN(int64_t rows, flags.GetInt("rows"));
  PS_ASSIGN_OR_RETURN(int64_t seed, flags.GetInt("seed"));
  PS_ASSIGN_OR_RETURN(int64_t first, flags.GetInt("first_row"));
  PS_ASSIGN_OR_RETURN(int64_t dense, flags.GetInt("dense_fields"));
  PS_ASSIGN_OR_RETURN(int64_t sparse, flags.GetInt("sparse_fields"));
  PS_ASSIGN_OR_RETURN(double zipf, flags.GetDouble("zipf"));
  PS_ASSIGN_OR_RETURN(double pos, flags.GetDouble("positive_rate"));
  PS_ASSIGN_OR_RETURN(double new_id_rate, flags.GetDouble("new_id_rate"));
  std::string out = flags.Get("out");
  const std::string stream = flags.Get("stream");
  if (out.empty() == stream.empty()) return UsageError("give one of --out and --stream");
  PS_ASSIGN_OR_RETURN(int64_t history, flags.GetInt("history"));
  if (history < 0 || history > 10000) return UsageError("--history must be in 0..10000");
  PS_ASSIGN_OR_RETURN(int64_t tasks, flags.GetInt("tasks"));
  if (tasks < 1 || tasks > 2) return UsageError("--tasks must be 1 or 2");
  if (history > 0) {
    if (!stream.empty()) return UsageError("--history writes one file (--out), not a --stream");
    worker::HistoryWorldOptions h;
    h.rows = rows;
    h.seed = static_cast<uint64_t>(seed);
    h.first_row = first;
    h.max_history = static_cast<int>(history);
    h.positive_rate = pos;
    h.tasks = static_cast<int>(tasks);
    PS_ASSIGN_OR_RETURN(worker::HistoryWorldReport report,
                        worker::WriteHistoryWorld(h, out, out + ".schema.json"));
    std::printf("wrote %lld rows (%.1f MB) with histories of up to %lld items to %s (schema: "
                "%s.schema.json): positive rate %.4f, oracle AUC %.4f\n",
                static_cast<long long>(report.rows), report.bytes / 1e6,
                static_cast<long long>(history), out.c_str(), out.c_str(), report.positive_rate,
                report.oracle_auc);
    if (tasks == 2) {
      std::printf("converted (on the clicked rows): rate %.4f, oracle AUC %.4f\n",
                  report.conversion_rate, report.conversion_oracle_auc);
    }
    return absl::OkStatus();
  }
  if (tasks != 1) return UsageError("--tasks=2 goes with --history (behaviour data with a conversion label)");
  o.rows = rows;
  o.seed = static_cast<uint64_t>(seed);
  o.first_row = first;
  o.num_dense = static_cast<int>(dense);
  o.num_sparse = static_cast<int>(sparse);
  o.zipf = zipf;
  o.target_positive_rate = pos;
  o.new_id_rate = new_id_rate;
  if (!stream.empty()) return WriteStream(flags, o, stream);
  PS_ASSIGN_OR_RETURN(auto report, worker::WriteSynthetic(o, out));
  PS_RETURN_IF_ERROR(WriteFileAtomically(out + ".meta.json", MetaLine(o, report).str() + "\n"));
  std::printf("wrote %lld rows (%.1f MB) to %s in %.1f s: positive rate %.4f, oracle AUC %.4f, "
              "oracle logloss %.4f\n",
              static_cast<long long>(report.rows), report.bytes / 1e6, out.c_str(),
              report.seconds, report.positive_rate, report.oracle_auc, report.oracle_logloss);
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
