// Whole pipeline jobs in one process: a coordinator, parameter servers and
// R x P x T workers (RunPipelineWorker, as threads) on an in-process network,
// training on a synthetic file and evaluating; compared with the unsplit
// model trained by the ordinary Trainer.
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "data/synthetic.h"
#include "gtest/gtest.h"
#include "tests/data/test_files.h"
#include "tests/server/test_cluster.h"
#include "worker/pipeline/pipeline_worker.h"
#include "worker/trainer.h"

namespace pstrain::worker {
namespace {

struct JobResult {
  std::vector<absl::Status> status;
  std::vector<PipelineStageResult> stages;
};

JobResult RunJob(const WorkerOptions& base, int servers, proto::Consistency consistency) {
  const int workers =
      base.pipeline.stages * base.pipeline.replicas * base.pipeline.tensor_parallel;
  pstrain::testing::InProcServerSide cluster(servers, workers, consistency);
  JobResult out;
  out.status.assign(workers, absl::OkStatus());
  out.stages.resize(workers);
  std::vector<std::thread> worker_threads;
  for (int w = 0; w < workers; ++w) {
    worker_threads.emplace_back([&, w] {
      WorkerOptions o = base;
      o.coordinator = "coord";
      o.bind = "worker" + std::to_string(w);
      o.rank = w;
      if (w != 0) o.train.metrics_out.clear();
      WorkerRuntime rt;
      rt.make_transport = [&cluster] { return std::make_unique<InProcTransport>(cluster.net()); };
      rt.on_shutdown = [](const absl::Status& why) { ADD_FAILURE() << "shut down: " << why; };
      rt.stage_result = &out.stages[w];
      rt.print_result = false;
      out.status[w] = RunPipelineWorker(o, rt);
    });
  }
  for (auto& t : worker_threads) t.join();
  cluster.Stop();
  return out;
}

class PipelineTrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticOptions w;
    w.rows = 12000;
    w.seed = 7;
    auto train = WriteSynthetic(w, dir_.File("train.tsv"));
    ASSERT_TRUE(train.ok()) << train.status();
    w.first_row = w.rows;
    w.rows = 4000;
    auto eval = WriteSynthetic(w, dir_.File("eval.tsv"));
    ASSERT_TRUE(eval.ok()) << eval.status();
  }

  WorkerOptions Options(const std::string& model) const {
    WorkerOptions o;
    o.mode = TrainMode::kPipeline;
    TrainOptions& t = o.train;
    t.model.name = model;
    t.model.embedding_dim = 8;
    t.model.bottom_mlp = {16, 8};
    t.model.top_mlp = {32, 16};
    t.model.deep_mlp = {32, 32, 32, 32};
    t.model.dense_optimizer.lr = 0.01f;
    t.model.sparse_optimizer.lr = 0.05f;
    t.model.device = "cpu";
    t.train_data = {dir_.File("train.tsv")};
    t.eval_data = {dir_.File("eval.tsv")};
    t.batch_size = 256;
    t.eval_batch_size = 1000;
    t.log_every = absl::Milliseconds(20);
    o.pipeline.timeout = absl::Seconds(30);
    return o;
  }

  // The unsplit model, trained by the ordinary Trainer (one worker, BSP).
  TrainResult Unsplit(WorkerOptions o) {
    o.train.metrics_out.clear();
    auto model = CreateModel(o.train.model);
    EXPECT_TRUE(model.ok());
    pstrain::testing::TestCluster cluster(2, 1, proto::Consistency::kBsp, 0, 256);
    cluster.DefineTables((*model)->tables());
    Trainer trainer(o.train, model->get(), &cluster.kv(0), cluster.worker(0).coord.get(), 0, 1);
    auto r = trainer.Run();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : TrainResult();
  }

  testing_util::ScratchDir dir_;
};

TEST_F(PipelineTrainTest, DlrmOnTwoStagesLearnsWhatTheUnsplitModelLearns) {
  WorkerOptions o = Options("dlrm");
  o.pipeline.stages = 2;
  o.pipeline.microbatches = 4;
  o.pipeline.schedule = PipeSchedule::k1F1B;
  o.train.metrics_out = dir_.File("metrics.jsonl");
  JobResult job = RunJob(o, 2, proto::Consistency::kBsp);
  for (const absl::Status& st : job.status) ASSERT_TRUE(st.ok()) << st;
  const TrainResult& pipe = job.stages[0].train;
  EXPECT_EQ(pipe.steps, 47);  // 12000 rows / 256
  EXPECT_EQ(job.stages[1].train.steps, 47);
  EXPECT_EQ(pipe.eval_rows, 4000);
  TrainResult unsplit = Unsplit(o);
  EXPECT_GT(unsplit.eval_auc, 0.6);
  // Same updates up to float summation order.
  EXPECT_NEAR(pipe.eval_auc, unsplit.eval_auc, 0.005);
  EXPECT_NEAR(pipe.eval_logloss, unsplit.eval_logloss, 0.005);
  EXPECT_LE(job.stages[0].max_live_microbatches, 2);
  EXPECT_GT(job.stages[0].bytes_sent, 0u);

  std::ifstream in(o.train.metrics_out);
  std::string line, last;
  bool progress_with_pipeline = false;
  while (std::getline(in, line)) {
    if (line.find("\"event\":\"progress\"") != std::string::npos &&
        line.find("\"stage_busy_seconds\":[") != std::string::npos &&
        line.find("\"bubble\":") != std::string::npos) {
      progress_with_pipeline = true;
    }
    last = line;
  }
  EXPECT_NE(last.find("\"event\":\"summary\""), std::string::npos) << last;
  EXPECT_NE(last.find("\"stage_activation_bytes\":["), std::string::npos) << last;
  EXPECT_TRUE(progress_with_pipeline);
}

TEST_F(PipelineTrainTest, DeepTowerOnTwoReplicasOfThreeStagesTrainsAndEvaluates) {
  WorkerOptions o = Options("deep_tower");
  o.pipeline.stages = 3;
  o.pipeline.replicas = 2;
  o.pipeline.microbatches = 3;
  o.pipeline.schedule = PipeSchedule::kGpipe;
  o.train.eval_every_steps = 10;
  JobResult job = RunJob(o, 1, proto::Consistency::kAsp);
  for (const absl::Status& st : job.status) ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(job.stages[0].train.eval_rows, 4000);  // both replicas' halves
  EXPECT_GT(job.stages[0].train.eval_auc, 0.6);
  for (int w = 0; w < 6; ++w) {
    EXPECT_EQ(job.stages[w].replica, w / 3);
    EXPECT_EQ(job.stages[w].stage, w % 3);
    EXPECT_EQ(job.stages[w].max_live_microbatches, 3);  // GPipe keeps M
  }
  EXPECT_EQ(job.stages[0].reports.size(), 3u);
  EXPECT_GT(job.stages[0].bubble, 0.0);
}

TEST_F(PipelineTrainTest, DeepTowerOnTwoStagesOfTwoTensorParallelRanksLearnsLikeTheUnsplitModel) {
  WorkerOptions o = Options("deep_tower");
  o.pipeline.stages = 2;
  o.pipeline.tensor_parallel = 2;
  o.pipeline.microbatches = 2;
  o.pipeline.stage_layers = "0-1,2-4";  // a column + row pair on each stage
  JobResult job = RunJob(o, 2, proto::Consistency::kBsp);
  for (const absl::Status& st : job.status) ASSERT_TRUE(st.ok()) << st;
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(job.stages[w].stage, w / 2) << w;
    EXPECT_EQ(job.stages[w].train.steps, 47) << w;
  }
  const TrainResult& pipe = job.stages[0].train;
  EXPECT_EQ(pipe.eval_rows, 4000);
  TrainResult unsplit = Unsplit(o);
  // The slices start from other draws of the same initializer than the
  // unsplit tables: the same model up to its random start.
  EXPECT_GT(pipe.eval_auc, 0.6);
  EXPECT_NEAR(pipe.eval_auc, unsplit.eval_auc, 0.03);
}

}  // namespace
}  // namespace pstrain::worker
