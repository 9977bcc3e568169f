// pstrain gen: synthetic Criteo-format data from a hidden teacher model.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_util.h"
#include "common/json_line.h"
#include "launcher/args.h"
#include "launcher/commands.h"
#include "worker/data/synthetic.h"

namespace pstrain::launcher {

int RunGen(const std::vector<std::string>& argv) {
  FlagSet flags;
  flags.Define("rows", "100000", "Rows to write.")
      .Define("out", "", "Output file (Criteo TSV); OUT.meta.json gets the report.")
      .Define("seed", "1", "Seed of the world (teacher and distributions). Train and eval files "
                           "of one world share the seed and use disjoint --first_row ranges.")
      .Define("first_row", "0", "Index of the first row to write.")
      .Define("dense_fields", "13", "Integer columns.")
      .Define("sparse_fields", "26", "Categorical columns.")
      .Define("zipf", "1.1", "Zipf exponent of the categorical values.")
      .Define("positive_rate", "0.25", "Target click rate.");
  if (WantsHelp(argv)) {
    std::printf(
        "usage: pstrain gen --rows=N --out=FILE [--seed=K] [--first_row=R]\n\n"
        "Writes synthetic click data (label, 13 integer, 26 categorical columns) drawn from a\n"
        "hidden teacher: per-value weights, non-linear effects of the integers, and pairwise\n"
        "interactions between fields that a linear model cannot express. Prints the teacher's\n"
        "oracle AUC on the rows written: the best any model can do on this file.\n\n%s",
        flags.Help().c_str());
    return 0;
  }
  auto args = ParseArgs(argv);
  absl::Status st = args.status();
  if (st.ok()) st = flags.Take(*args, false).status();
  worker::SyntheticOptions o;
  auto rows = flags.GetInt("rows");
  auto seed = flags.GetInt("seed");
  auto first = flags.GetInt("first_row");
  auto dense = flags.GetInt("dense_fields");
  auto sparse = flags.GetInt("sparse_fields");
  auto zipf = flags.GetDouble("zipf");
  auto pos = flags.GetDouble("positive_rate");
  for (const absl::Status& s : {rows.status(), seed.status(), first.status(), dense.status(),
                                sparse.status(), zipf.status(), pos.status()}) {
    if (st.ok()) st = s;
  }
  std::string out = flags.Get("out");
  if (st.ok() && out.empty()) st = absl::InvalidArgumentError("--out is required");
  if (!st.ok()) {
    std::fprintf(stderr, "pstrain gen: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  o.rows = *rows;
  o.seed = static_cast<uint64_t>(*seed);
  o.first_row = *first;
  o.num_dense = static_cast<int>(*dense);
  o.num_sparse = static_cast<int>(*sparse);
  o.zipf = *zipf;
  o.target_positive_rate = *pos;
  auto report = worker::WriteSynthetic(o, out);
  if (!report.ok()) {
    std::fprintf(stderr, "pstrain gen: %s\n", report.status().ToString().c_str());
    return 1;
  }
  JsonLine meta;
  meta.Add("rows", report->rows)
      .Add("seed", static_cast<int64_t>(o.seed))
      .Add("first_row", o.first_row)
      .Add("positive_rate", report->positive_rate)
      .Add("oracle_auc", report->oracle_auc)
      .Add("oracle_logloss", report->oracle_logloss)
      .Add("bytes", static_cast<int64_t>(report->bytes));
  if (absl::Status w = WriteFileAtomically(out + ".meta.json", meta.str() + "\n"); !w.ok()) {
    std::fprintf(stderr, "pstrain gen: %s\n", w.ToString().c_str());
    return 1;
  }
  std::printf("wrote %lld rows (%.1f MB) to %s in %.1f s: positive rate %.4f, oracle AUC %.4f, "
              "oracle logloss %.4f\n",
              static_cast<long long>(report->rows), report->bytes / 1e6, out.c_str(),
              report->seconds, report->positive_rate, report->oracle_auc, report->oracle_logloss);
  return 0;
}

}  // namespace pstrain::launcher
