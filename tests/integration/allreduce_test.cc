// --mode=allreduce against --mode=ps --consistency=bsp: with the same seeds
// and data, 2 workers end with the same dense parameters and eval AUC.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <signal.h>

#include <gtest/gtest.h>

#include "data/synthetic.h"
#include "serve/model_io.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

double EvalAuc(const std::string& metrics) { return LastJsonNumber(metrics, "eval_auc"); }

TEST(Allreduce, SameDenseParametersAndAucAsBspParameterServers) {
  std::string dir = MakeTempDir("pstrain-ar");
  worker::SyntheticOptions o;
  o.seed = 9;
  o.rows = 40000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/train.tsv").ok());
  o.first_row = o.rows;
  o.rows = 10000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/eval.tsv").ok());
  std::vector<std::string> common = {"local", "--servers=2", "--workers=2", "--consistency=bsp",
                                     "--model=dlrm", "--batch_size=256", "--max_steps=50",
                                     "--train_data=" + dir + "/train.tsv",
                                     "--eval_data=" + dir + "/eval.tsv", "--timeout=240"};
  for (std::string mode : {"ps", "allreduce"}) {
    std::vector<std::string> args = common;
    args.push_back("--mode=" + mode);
    args.push_back("--save_model=" + dir + "/model_" + mode);
    args.push_back("--metrics_out=" + dir + "/metrics_" + mode + ".jsonl");
    TestProcess p("pstrain", args, dir + "/" + mode + ".log");
    ASSERT_EQ(p.Wait(absl::Minutes(4)), 0) << p.Log();
  }
  auto ps = worker::ReadModel(dir + "/model_ps");
  auto ar = worker::ReadModel(dir + "/model_allreduce");
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE(ar.ok()) << ar.status();
  ASSERT_EQ(ps->tables.size(), ar->tables.size());
  int dense_tables = 0;
  for (size_t t = 0; t < ps->tables.size(); ++t) {
    const auto& a = ps->tables[t];
    const auto& b = ar->tables[t];
    if (a.spec.kind != TableKind::kDense) continue;
    ++dense_tables;
    ASSERT_EQ(a.dense.size(), b.dense.size()) << a.spec.name;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.dense.size(); ++i) {
      num += (a.dense[i] - b.dense[i]) * double(a.dense[i] - b.dense[i]);
      den += double(a.dense[i]) * a.dense[i];
    }
    EXPECT_LT(std::sqrt(num / std::max(den, 1e-30)), 1e-5) << a.spec.name;
  }
  EXPECT_GT(dense_tables, 4);
  double auc_ps = EvalAuc(dir + "/metrics_ps.jsonl");
  double auc_ar = EvalAuc(dir + "/metrics_allreduce.jsonl");
  EXPECT_NEAR(auc_ps, auc_ar, 0.0005) << "ps " << auc_ps << " allreduce " << auc_ar;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing

namespace pstrain::testing {
namespace {

TEST(Allreduce, AWorkerKilledMidAllreduceMakesTheOthersFailNamingItsRank) {
  std::string dir = MakeTempDir("pstrain-ar");
  worker::SyntheticOptions o;
  o.seed = 4;
  o.rows = 600000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/train.tsv").ok());
  TestProcess coordinator("pstrain_coordinator",
                          {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + dir + "/coord",
                           "--servers=1", "--workers=3", "--heartbeat_timeout=30"},
                          dir + "/coordinator.log");
  std::string coord = WaitForFileLine(dir + "/coord", absl::Seconds(20));
  ASSERT_FALSE(coord.empty());
  TestProcess server("pstrain_server", {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0"},
                     dir + "/server.log");
  std::vector<std::unique_ptr<TestProcess>> workers;
  for (int w = 0; w < 3; ++w) {
    workers.push_back(std::make_unique<TestProcess>(
        "pstrain_worker",
        std::vector<std::string>{"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0",
                                 "--rank=" + std::to_string(w), "--mode=allreduce",
                                 "--model=dlrm", "--batch_size=256",
                                 "--collective_timeout=20", "--train_data=" + dir + "/train.tsv"},
        dir + "/worker" + std::to_string(w) + ".log"));
  }
  // Let training start, then kill rank 2 outright.
  absl::Time until = absl::Now() + absl::Seconds(60);
  while (workers[2]->Log().find("allreduce mode") == std::string::npos && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  absl::SleepFor(absl::Milliseconds(500));
  workers[2]->Signal(SIGKILL);
  absl::Time killed = absl::Now();
  for (int w = 0; w < 2; ++w) {
    int code = workers[w]->Wait(absl::Seconds(60));
    EXPECT_NE(code, 0) << workers[w]->Log();
    EXPECT_NE(code, -1) << "worker " << w << " hangs";
    std::string log = workers[w]->Log();
    EXPECT_NE(log.find("rank(s) 2 not responding"), std::string::npos) << log;
  }
  EXPECT_LT(absl::Now() - killed, absl::Seconds(45));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
