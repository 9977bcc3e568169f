// pstrain gen: synthetic Criteo-format data from a hidden teacher model.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json_line.h"
#include "common/status.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "worker/data/synthetic.h"

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
                                  "seen before (a growing, long-tailed id space; 0: none).");
  return flags;
}

}  // namespace

std::string GenHelp() {
  return absl::StrCat(
      "usage: pstrain gen --rows=N --out=FILE [--seed=K] [--first_row=R]\n\n"
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
  if (out.empty()) return UsageError("--out is required");
  o.rows = rows;
  o.seed = static_cast<uint64_t>(seed);
  o.first_row = first;
  o.num_dense = static_cast<int>(dense);
  o.num_sparse = static_cast<int>(sparse);
  o.zipf = zipf;
  o.target_positive_rate = pos;
  o.new_id_rate = new_id_rate;
  PS_ASSIGN_OR_RETURN(auto report, worker::WriteSynthetic(o, out));
  JsonLine meta;
  meta.Add("rows", report.rows)
      .Add("seed", static_cast<int64_t>(o.seed))
      .Add("first_row", o.first_row)
      .Add("positive_rate", report.positive_rate)
      .Add("oracle_auc", report.oracle_auc)
      .Add("oracle_logloss", report.oracle_logloss)
      .Add("bytes", static_cast<int64_t>(report.bytes));
  if (o.new_id_rate > 0) meta.Add("new_id_rate", o.new_id_rate);  // default: as before
  PS_RETURN_IF_ERROR(WriteFileAtomically(out + ".meta.json", meta.str() + "\n"));
  std::printf("wrote %lld rows (%.1f MB) to %s in %.1f s: positive rate %.4f, oracle AUC %.4f, "
              "oracle logloss %.4f\n",
              static_cast<long long>(report.rows), report.bytes / 1e6, out.c_str(),
              report.seconds, report.positive_rate, report.oracle_auc, report.oracle_logloss);
  return absl::OkStatus();
}

}  // namespace pstrain::launcher
