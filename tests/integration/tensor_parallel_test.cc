// `pstrain local` runs a 3D job (2 replicas x 2 stages x 2 tensor-parallel
// ranks = 8 worker processes) to the end, and worker 0 reports it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/synthetic.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

TEST(TensorParallel, PstrainLocalRunsTwoReplicasOfTwoStagesOfTwoTensorParallelRanks) {
  std::string dir = MakeTempDir("pstrain-tp");
  worker::SyntheticOptions o;
  o.seed = 3;
  o.rows = 3000;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/train.tsv").ok());
  o.first_row = o.rows;
  o.rows = 500;
  ASSERT_TRUE(worker::WriteSynthetic(o, dir + "/eval.tsv").ok());
  std::vector<std::string> args = {"local",
                                   "--servers=2",
                                   "--mode=pipeline",
                                   "--replicas=2",
                                   "--stages=2",
                                   "--tensor_parallel=2",
                                   "--microbatches=2",
                                   "--consistency=bsp",
                                   "--model=deep_tower",
                                   "--tower_layers=4",
                                   "--tower_width=32",
                                   "--embedding_dim=4",
                                   "--batch_size=128",
                                   "--stage_layers=0-1,2-4",
                                   "--train_data=" + dir + "/train.tsv",
                                   "--eval_data=" + dir + "/eval.tsv",
                                   "--metrics_out=" + dir + "/metrics.jsonl",
                                   "--timeout=60"};
  TestProcess p("pstrain", args, dir + "/local.log");
  ASSERT_EQ(p.Wait(absl::Seconds(90)), 0) << p.Log();
  const std::string log = p.Log();
  EXPECT_NE(log.find("RESULT model=deep_tower mode=pipeline stages=2 replicas=2 tensor_parallel=2"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("tower layers 0: column, 1: row, 2: column, 3: row, 4 (logit): replicated"),
            std::string::npos)
      << log;
  std::ifstream in(dir + "/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  EXPECT_NE(last.find("\"event\":\"summary\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"workers\":8"), std::string::npos) << last;
  EXPECT_NE(last.find("\"train_samples\":3000"), std::string::npos) << last;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
