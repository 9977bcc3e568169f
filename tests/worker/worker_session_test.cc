// Whole ps and allreduce jobs in one process, the way Gloo's base_test runs
// N ranks as threads: a coordinator, 2 parameter servers and 2 workers
// (RunWorker, each on a thread of its own, each on its WorkerSession) on an
// in-process network, training on a synthetic file and evaluating. Also:
// a Shutdown from the coordinator ends the workers, not the process, and
// the session's control handler on its own.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/inproc_transport.h"
#include "common/optim/initializer.h"
#include "data/reader.h"
#include "data/synthetic.h"
#include "gtest/gtest.h"
#include "serve/model_io.h"
#include "tests/data/test_files.h"
#include "tests/server/test_cluster.h"
#include "worker/worker_app.h"

namespace pstrain::worker {
namespace {

constexpr int kServers = 2;
constexpr int kWorkers = 2;
constexpr int64_t kTrainRows = 12000;
constexpr int64_t kEvalRows = 4000;
// A job takes ~1 s (2 shared cores, Release); past this it is stuck, and
// the test stops the cluster, which tells the workers to stop.
constexpr absl::Duration kJobLimit = absl::Seconds(60);

struct JobResult {
  bool finished = false;  // within kJobLimit
  std::vector<absl::Status> status;
  std::vector<TrainResult> train;
  std::vector<server::ServerStats> servers;
  std::vector<absl::Status> shutdowns;  // what on_shutdown was told, by worker
};

// The cluster's side: a coordinator and kServers servers.
class InProcCluster : public pstrain::testing::InProcServerSide {
 public:
  InProcCluster(int workers, proto::Consistency consistency)
      : InProcServerSide(kServers, workers, consistency) {}
};

// Runs `workers` workers of `base` (rank w binds "worker<w>") against
// `cluster`, waits up to `limit` for all of them, then stops the cluster
// (which tells any worker still running to stop) and joins them.
JobResult RunWorkers(InProcCluster& cluster, const WorkerOptions& base, int workers,
                     absl::Duration limit) {
  JobResult out;
  out.status.assign(workers, absl::UnknownError("did not return"));
  out.train.resize(workers);
  out.shutdowns.assign(workers, absl::OkStatus());
  std::atomic<int> running{workers};
  absl::Notification all_done;
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      WorkerOptions o = base;
      o.coordinator = "coord";
      o.bind = "worker" + std::to_string(w);
      o.rank = w;
      if (w != 0) o.train.save_model.clear();
      WorkerRuntime rt;
      rt.make_transport = [&cluster] { return std::make_unique<InProcTransport>(cluster.net()); };
      rt.on_shutdown = [&out, w](const absl::Status& why) {
        out.shutdowns[w] = why.ok() ? absl::CancelledError("shut down") : why;
      };
      rt.result = &out.train[w];
      out.status[w] = RunWorker(o, rt);
      if (--running == 0) all_done.Notify();
    });
  }
  out.finished = all_done.WaitForNotificationWithTimeout(limit);
  cluster.Stop();
  for (auto& t : threads) t.join();
  for (int s = 0; s < kServers; ++s) out.servers.push_back(cluster.server(s).stats());
  return out;
}

int64_t ShardRows(const std::string& path, int shard, int num_shards) {
  ReaderOptions ro;
  ro.patterns = {path};
  ro.shard_index = shard;
  ro.num_shards = num_shards;
  auto all = ReadAll(ro);
  EXPECT_TRUE(all.ok()) << all.status();
  return all.ok() ? (*all)->size : -1;
}

// sqrt(sum (a - b)^2 / sum b^2).
double RelativeDistance(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class WorkerSessionJob : public ::testing::Test {
 protected:
  void SetUp() override {
    SyntheticOptions w;
    w.rows = kTrainRows;
    w.seed = 7;
    auto train = WriteSynthetic(w, dir_.File("train.tsv"));
    ASSERT_TRUE(train.ok()) << train.status();
    w.first_row = w.rows;
    w.rows = kEvalRows;
    auto eval = WriteSynthetic(w, dir_.File("eval.tsv"));
    ASSERT_TRUE(eval.ok()) << eval.status();
  }

  WorkerOptions Options(const std::string& mode) const {
    WorkerOptions o;
    o.mode = *ParseTrainMode(mode);
    o.connect_timeout = absl::Seconds(20);
    o.collective_timeout = absl::Seconds(30);
    TrainOptions& t = o.train;
    t.model.name = "dlrm";
    t.model.embedding_dim = 8;
    t.model.bottom_mlp = {16, 8};
    t.model.top_mlp = {32, 16};
    t.model.dense_optimizer.lr = 0.01f;
    t.model.sparse_optimizer.lr = 0.05f;
    t.model.device = "cpu";
    t.train_data = {dir_.File("train.tsv")};
    t.eval_data = {dir_.File("eval.tsv")};
    t.batch_size = 256;
    t.eval_batch_size = 1000;
    t.log_every = absl::Seconds(5);
    t.save_model = dir_.File("model_" + mode);
    return o;
  }

  // Runs a 2 x 2 job of `mode` under BSP and checks what every job must
  // show: it finished in time, every worker trained exactly its shard's
  // rows, both servers served pulls and pushes, the lead evaluated every
  // eval row above chance and saved a model whose dense tables moved away
  // from their initial values.
  SavedModel RunAndCheck(const std::string& mode, double* auc) {
    InProcCluster cluster(kWorkers, proto::Consistency::kBsp);
    const absl::Time start = absl::Now();
    JobResult job = RunWorkers(cluster, Options(mode), kWorkers, kJobLimit);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    EXPECT_TRUE(job.finished) << mode << ": the job did not finish within " << kJobLimit;
    for (int w = 0; w < kWorkers; ++w) {
      EXPECT_TRUE(job.status[w].ok()) << mode << " worker " << w << ": " << job.status[w];
      EXPECT_TRUE(job.shutdowns[w].ok()) << mode << " worker " << w << ": " << job.shutdowns[w];
      const int64_t shard = ShardRows(dir_.File("train.tsv"), w, kWorkers);
      EXPECT_EQ(job.train[w].samples, shard) << mode << " worker " << w;
      EXPECT_EQ(job.train[w].steps, (shard + 255) / 256) << mode << " worker " << w;
    }
    EXPECT_EQ(job.train[0].samples + job.train[1].samples, kTrainRows) << mode;
    for (int s = 0; s < kServers; ++s) {
      EXPECT_GT(job.servers[s].pulls, 0u) << mode << " server " << s;
      EXPECT_GT(job.servers[s].pushes, 0u) << mode << " server " << s;
      EXPECT_EQ(job.servers[s].errors, 0u) << mode << " server " << s;
    }
    EXPECT_EQ(job.train[0].eval_rows, kEvalRows) << mode;
    EXPECT_GT(job.train[0].eval_auc, 0.6) << mode;
    *auc = job.train[0].eval_auc;
    std::printf("%s job: %.1f s, steps %lld + %lld, eval AUC %.4f\n", mode.c_str(), seconds,
                static_cast<long long>(job.train[0].steps),
                static_cast<long long>(job.train[1].steps), job.train[0].eval_auc);
    auto saved = ReadModel(dir_.File("model_" + mode));
    EXPECT_TRUE(saved.ok()) << saved.status();
    if (!saved.ok()) return SavedModel();
    int dense = 0;
    for (const TableValues& t : saved->tables) {
      if (t.spec.kind != TableKind::kDense) continue;
      ++dense;
      auto init = optim::Initializer::Create(t.spec.init, t.spec.id);
      EXPECT_TRUE(init.ok()) << init.status();
      std::vector<float> initial(t.dense.size());
      init->FillRange(0, initial.data(), initial.size());
      EXPECT_GT(RelativeDistance(t.dense, initial), 1e-3) << mode << " " << t.spec.name;
    }
    EXPECT_GT(dense, 4) << mode;
    return *std::move(saved);
  }

  testing_util::ScratchDir dir_;
};

TEST_F(WorkerSessionJob, PsAndAllreduceJobsRunInProcessAndEndWithTheSameModel) {
  double auc_ps = 0, auc_ar = 0;
  SavedModel ps = RunAndCheck("ps", &auc_ps);
  SavedModel ar = RunAndCheck("allreduce", &auc_ar);
  // Allreduce sums the same gradients the BSP servers do: the same dense
  // parameters up to float summation order, and the same AUC.
  ASSERT_EQ(ps.tables.size(), ar.tables.size());
  double worst = 0;
  for (size_t t = 0; t < ps.tables.size(); ++t) {
    if (ps.tables[t].spec.kind != TableKind::kDense) continue;
    ASSERT_EQ(ps.tables[t].dense.size(), ar.tables[t].dense.size()) << ps.tables[t].spec.name;
    const double d = RelativeDistance(ar.tables[t].dense, ps.tables[t].dense);
    EXPECT_LT(d, 1e-5) << ps.tables[t].spec.name;
    worst = std::max(worst, d);
  }
  EXPECT_NEAR(auc_ps, auc_ar, 0.0005);
  std::printf("dense tables, allreduce vs ps: relative distance <= %.2g\n", worst);
}

TEST_F(WorkerSessionJob, ShutdownFromTheCoordinatorEndsTheWorkersNotTheProcess) {
  // The job waits for a third worker that never comes; the coordinator is
  // stopped meanwhile and tells the two that came to stop.
  InProcCluster cluster(kWorkers + 1, proto::Consistency::kAsp);
  std::thread stopper([&cluster] {
    absl::SleepFor(absl::Seconds(1));
    cluster.Stop();
  });
  const absl::Time start = absl::Now();
  JobResult job = RunWorkers(cluster, Options("ps"), kWorkers, absl::Seconds(30));
  stopper.join();
  EXPECT_TRUE(job.finished);
  EXPECT_LT(absl::Now() - start, absl::Seconds(15));
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(job.shutdowns[w].code(), absl::StatusCode::kCancelled) << job.shutdowns[w];
    EXPECT_FALSE(job.status[w].ok()) << w;
    EXPECT_NE(job.status[w].message().find("coordinator stopped"), std::string::npos)
        << job.status[w];
  }
}

// The control handler on its own: one session, probed by a test node.
TEST(WorkerSession, AnswersPingsFencesTheServersOnARecoverNoticeAndIgnoresALateOne) {
  InProcCluster cluster(1, proto::Consistency::kAsp);
  WorkerSessionOptions so;
  so.coordinator = "coord";
  so.bind = "worker0";
  so.make_transport = [&cluster] { return std::make_unique<InProcTransport>(cluster.net()); };
  auto session = WorkerSession::Start(std::move(so));
  ASSERT_TRUE(session.ok()) << session.status();
  WorkerSession& s = **session;
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.view().servers.size(), 2u);
  TableSpec t;
  t.id = 0;
  t.name = "w";
  t.kind = TableKind::kDense;
  t.size = 8;
  auto layout = s.DefineTables({t});
  ASSERT_TRUE(layout.ok()) << layout.status();
  s.Connect(*layout);
  auto pull = [&s] { return s.kv()->Pull({0}, {}, 0).Wait().status(); };
  ASSERT_TRUE(pull().ok()) << pull();

  RpcNode probe(std::make_unique<InProcTransport>(cluster.net()));
  ASSERT_TRUE(probe.Bind("probe").ok());
  ASSERT_TRUE(probe.Start([](RpcRequest&&) {}).ok());
  const PeerId worker = probe.Connect("worker0");
  auto call = [&](proto::MsgType type, std::optional<proto::RecoverNotice> notice = {}) {
    proto::Header h;
    h.type = type;
    Message m = notice ? proto::Encode(h, *notice) : proto::EncodeHeaderOnly(h);
    return proto::DecodeReply(probe.Call(worker, std::move(m), absl::Now() + absl::Seconds(5)).Wait(),
                              "probe")
        .status();
  };
  EXPECT_TRUE(call(proto::MsgType::kPing).ok());
  EXPECT_EQ(call(proto::MsgType::kHeartbeat).code(), absl::StatusCode::kUnimplemented);

  // A rollback to epoch 1: the servers are fenced, the coordinator is not.
  EXPECT_TRUE(call(proto::MsgType::kRecover, proto::RecoverNotice{1, "server 1 died"}).ok());
  EXPECT_EQ(s.announced_epoch()->load(), 1u);
  EXPECT_TRUE(s.rolling_back());
  absl::Status fenced = pull();
  EXPECT_EQ(fenced.code(), absl::StatusCode::kAborted) << fenced;
  EXPECT_NE(fenced.message().find("server 1 died"), std::string::npos) << fenced;
  EXPECT_TRUE(s.coordinator()->Barrier("still-talking", 1, absl::Seconds(5)).ok());
  // A notice of the epoch the worker is at already changes nothing.
  EXPECT_TRUE(call(proto::MsgType::kRecover, proto::RecoverNotice{0, "late"}).ok());
  EXPECT_EQ(s.announced_epoch()->load(), 1u);
  EXPECT_EQ(s.epoch(), 0u);
  probe.Stop();
}

}  // namespace
}  // namespace pstrain::worker
