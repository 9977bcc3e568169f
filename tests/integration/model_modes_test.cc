// Every model in every training mode, as a user starts it: `pstrain local`
// with --mode=ps, allreduce and pipeline trains each model to the end and
// learns (eval AUC well above chance on generated data); the models whose
// logit is not the end of a tower (lr, wide_deep, deepfm) are refused in
// pipeline mode before any process starts, the message saying why.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "data/synthetic.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

class ModelModesTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("pstrain-models"));
    worker::SyntheticOptions o;
    o.seed = 21;
    o.rows = 30000;
    ASSERT_TRUE(worker::WriteSynthetic(o, *dir_ + "/train.tsv").ok());
    o.first_row = o.rows;
    o.rows = 8000;
    ASSERT_TRUE(worker::WriteSynthetic(o, *dir_ + "/eval.tsv").ok());
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string* dir_;
};
std::string* ModelModesTest::dir_ = nullptr;

bool HasTower(const std::string& model) {
  return model == "dlrm" || model == "deep_tower" || model == "dcn_v2";
}

TEST_P(ModelModesTest, TrainsToTheEndOrIsRefusedUpFront) {
  const auto& [model, mode] = GetParam();
  const std::string name = absl::StrCat(model, "-", mode);
  std::vector<std::string> args = {"local",
                                   "--model=" + model,
                                   "--mode=" + mode,
                                   "--servers=1",
                                   "--batch_size=256",
                                   "--train_data=" + *dir_ + "/train.tsv",
                                   "--eval_data=" + *dir_ + "/eval.tsv",
                                   "--metrics_out=" + *dir_ + "/" + name + ".jsonl",
                                   "--timeout=200"};
  if (model == "deep_tower") args.push_back("--deep_mlp=64,32");
  if (mode == "pipeline") {
    args.push_back("--stages=2");
  } else {
    args.push_back("--workers=2");
  }
  const absl::Time start = absl::Now();
  TestProcess p("pstrain", args, *dir_ + "/" + name + ".log");
  const int code = p.Wait(absl::Minutes(4));
  if (mode == "pipeline" && !HasTower(model)) {
    EXPECT_EQ(code, 2) << p.Log();
    EXPECT_NE(p.Log().find("pipeline mode needs a model made of a head and a tower"),
              std::string::npos)
        << p.Log();
    EXPECT_NE(p.Log().find("not '" + model + "'"), std::string::npos) << p.Log();
    EXPECT_LT(absl::ToDoubleSeconds(absl::Now() - start), 10.0) << "refused only after starting";
    return;
  }
  ASSERT_EQ(code, 0) << p.Log();
  EXPECT_NE(p.Log().find("RESULT model=" + model), std::string::npos) << p.Log();
  const double auc = LastJsonNumber(*dir_ + "/" + name + ".jsonl", "eval_auc");
  std::printf("%s %s: eval AUC %.4f\n", model.c_str(), mode.c_str(), auc);
  // Learning, not quality (bench/ measures that): a model that learns nothing
  // scores 0.50 +- 0.007 on these 8,000 rows. The lowest seen is dcn_v2 in ps
  // mode under a loaded suite, 0.599-0.628 from U(+-0.05) rows
  // (ASP's staleness grows with the load), 0.628-0.661 unloaded.
  EXPECT_GT(auc, 0.57) << p.Log();
}

INSTANTIATE_TEST_SUITE_P(All, ModelModesTest,
                         ::testing::Combine(::testing::Values("lr", "wide_deep", "dlrm",
                                                              "deep_tower", "dcn_v2", "deepfm"),
                                            ::testing::Values("ps", "allreduce", "pipeline")),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace pstrain::testing
