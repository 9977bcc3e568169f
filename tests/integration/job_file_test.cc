// Job files with real processes: `pstrain local --job` trains the demo job
// as its flags do, a server and a worker started with only --coordinator
// take the job from the coordinator (as compose and Kubernetes start them),
// and `pstrain job show` says where each value came from.
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/integration/test_process.h"

namespace pstrain::testing {
namespace {

using ::testing::HasSubstr;

// Every file of a model folder, by name.
std::map<std::string, std::string> ModelFiles(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    files[e.path().filename().string()] = ReadFile(e.path().string());
  }
  return files;
}

TEST(JobFile, TheDemoJobFileTrainsTheParametersItsFlagsTrain) {
  const std::string dir = MakeTempDir("pstrain-job");
  TrainEval d = WriteTrainEval(dir, 1, 20000, 4000);
  const std::string job = std::string(PSTRAIN_SOURCE_DIR) + "/examples/jobs/dlrm.json";
  // One server and one worker: the parameters depend on nothing but the job.
  const std::vector<std::string> where = {"--servers=1", "--workers=1", "--train_data=" + d.train,
                                          "--eval_data=" + d.eval, "--eval_meta=",
                                          "--metrics_out=" + dir + "/m.jsonl", "--timeout=120"};
  std::vector<std::string> from_job = {"local", "--job=" + job, "--save_model=" + dir + "/job"};
  from_job.insert(from_job.end(), where.begin(), where.end());
  std::string out;
  ASSERT_EQ(RunPstrain(from_job, dir + "/job.log", &out, absl::Minutes(3)), 0);
  std::vector<std::string> from_flags = {"local", "--model=dlrm", "--log_every_secs=2",
                                         "--save_model=" + dir + "/flags"};
  from_flags.insert(from_flags.end(), where.begin(), where.end());
  ASSERT_EQ(RunPstrain(from_flags, dir + "/flags.log", &out, absl::Minutes(3)), 0);
  const auto a = ModelFiles(dir + "/job");
  const auto b = ModelFiles(dir + "/flags");
  ASSERT_GT(a.size(), 10u);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, bytes] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(bytes == b.at(name)) << name << " differs";
  }
  std::filesystem::remove_all(dir);
}

TEST(JobFile, ServerAndWorkerStartedWithOnlyTheCoordinatorTakeItsJob) {
  const std::string dir = MakeTempDir("pstrain-job");
  TrainEval d = WriteTrainEval(dir, 2, 20000, 4000);
  const std::string job = dir + "/job.json";
  std::ofstream(job) << absl::StrCat(R"({
  // The whole job is here; the server and the worker get only --coordinator.
  "cluster": {"servers": 1, "workers": 1, "server_threads": 2},
  "tables": [{"name": "*", "dim": 8, "lr": 0.05}],
  "model": {"name": "wide_deep", "deep_mlp": [32, 16]},
  "data": {"train": ")", d.train, R"(", "eval": ")", d.eval, R"("},
  "train": {"batch_size": 256, "epochs": 2},
  "export": {"save_model": ")", dir, R"(/model"}
})");
  const std::string endpoint_file = dir + "/coordinator";
  TestProcess coordinator("pstrain_coordinator",
                          {"--bind=tcp://127.0.0.1:0", "--endpoint_file=" + endpoint_file, "--job=" + job},
                          dir + "/coordinator.log");
  const std::string coord = WaitForFileLine(endpoint_file, absl::Seconds(20));
  ASSERT_FALSE(coord.empty()) << coordinator.Log();
  TestProcess server("pstrain_server", {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0"},
                     dir + "/server.log");
  TestProcess worker("pstrain_worker", {"--coordinator=" + coord, "--bind=tcp://127.0.0.1:0"},
                     dir + "/worker.log");
  ASSERT_EQ(worker.Wait(absl::Minutes(2)), 0) << worker.Log();
  EXPECT_EQ(server.Wait(absl::Seconds(30)), 0) << server.Log();
  EXPECT_EQ(coordinator.Wait(absl::Seconds(30)), 0) << coordinator.Log();
  EXPECT_THAT(worker.Log(), HasSubstr("took the job from the coordinator at " + coord));
  EXPECT_THAT(server.Log(), HasSubstr("took the job from the coordinator at " + coord));
  // The job's settings, not the flags' defaults: two epochs of 256-row
  // batches of the wide & deep model, two executor threads, the model saved.
  EXPECT_THAT(server.Log(), HasSubstr("on 2 executor threads"));
  EXPECT_THAT(worker.Log(), HasSubstr("wide_deep"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/model/model.json")) << worker.Log();
  std::filesystem::remove_all(dir);
}

// One file for the whole job, the network included: the model's graph inline.
TEST(JobFile, AJobFileWithItsNetworkInlineTrainsIt) {
  const std::string dir = MakeTempDir("pstrain-job");
  TrainEval d = WriteTrainEval(dir, 1, 8000, 2000);
  const std::string job = dir + "/job.json";
  std::ofstream(job) << absl::StrCat(R"({
  "cluster": {"servers": 1, "workers": 2},
  "model": {"graph": {
    "name": "inline_dlrm_fm",
    "layers": [
      {"name": "bottom", "type": "mlp", "input": "dense", "widths": [32, 16], "relu_last": true},
      {"name": "interaction", "type": "dot_interaction", "inputs": ["bottom", "embeddings"]},
      {"name": "fm", "type": "fm", "inputs": ["embeddings"]},
      {"name": "top", "type": "mlp", "inputs": ["interaction", "fm"], "widths": [32, 1]}
    ],
    "heads": [{"name": "click", "input": "top"}]}},
  "data": {"train": ")", d.train, R"(", "eval": ")", d.eval, R"("},
  "train": {"batch_size": 256}
})");
  std::string out;
  ASSERT_EQ(RunPstrain({"local", "--job=" + job, "--timeout=120"}, dir + "/local.log", &out,
                       absl::Minutes(2)),
            0)
      << out;
  EXPECT_THAT(out, HasSubstr("RESULT model=inline_dlrm_fm"));
  // A mistake inside it names the layer before anything starts.
  std::string text = ReadFile(job);
  text.replace(text.find("\"fm\"]"), 5, "\"fn\"]");
  std::ofstream(dir + "/bad.json") << text;
  EXPECT_EQ(RunPstrain({"local", "--job=" + dir + "/bad.json"}, dir + "/bad.log", &out,
                       absl::Seconds(30)),
            2);
  EXPECT_THAT(out, HasSubstr("the job's model.graph:1: layer \"top\": no input or layer \"fn\" "
                             "(did you mean \"fm\"?)"));
  std::filesystem::remove_all(dir);
}

TEST(JobFile, AFlagOverridesTheFileAndShowSaysWhereEachValueCameFrom) {
  const std::string dir = MakeTempDir("pstrain-job");
  TrainEval d = WriteTrainEval(dir, 3, 2000, 500);
  const std::string job = dir + "/job.json";
  std::ofstream(job) << "{\n  \"train\": {\"epochs\": 3, \"batch_size\": 128},\n  \"data\": {\"train\": \""
                     << d.train << "\"}\n}\n";
  std::string out;
  ASSERT_EQ(RunPstrain({"job", "show", "--job=" + job, "--epochs=2"}, dir + "/show.log", &out,
                       absl::Seconds(30)),
            0);
  EXPECT_THAT(out, ::testing::ContainsRegex("train.epochs +2 +flag"));
  EXPECT_THAT(out, ::testing::ContainsRegex("train.batch_size +128 +file " + job + ":2"));
  EXPECT_THAT(out, ::testing::ContainsRegex("train.seed +1 +default"));
  EXPECT_THAT(out, ::testing::ContainsRegex("cluster.staleness +2 +default"));
  EXPECT_THAT(out, HasSubstr("check: ok"));
  // A typo is a usage error naming the file and line, before anything starts.
  std::ofstream(job) << "{\n  \"train\": {\n    \"epoch\": 3\n  }\n}\n";
  EXPECT_EQ(RunPstrain({"local", "--job=" + job}, dir + "/bad.log", &out, absl::Seconds(30)), 2);
  EXPECT_THAT(out, HasSubstr(job + ":3: unknown field train.epoch (did you mean train.epochs?)"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pstrain::testing
