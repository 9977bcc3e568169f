#include "launcher/console.h"

#include <gtest/gtest.h>

namespace pstrain::launcher {
namespace {

std::string Shown(Console& c, const std::string& label, const std::string& line, bool* progress = nullptr) {
  bool p = false;
  std::string s = c.Shown(label, line, &p);
  if (progress != nullptr) *progress = p;
  return s;
}

TEST(Console, AnInfoLineLosesItsTimeLevelAndLoggerName) {
  Console c;
  c.Configure(0, false);
  EXPECT_EQ(Shown(c, "worker 0", "[03:25:38.084] [info] worker: eval at step 43: AUC 0.7647"),
            "[worker 0] eval at step 43: AUC 0.7647");
  EXPECT_EQ(Shown(c, "worker 1", "[03:25:38.084] [warning] worker: data shard 1 of 2 holds no data"),
            "[worker 1] warning: data shard 1 of 2 holds no data");
  EXPECT_EQ(Shown(c, "worker 0", "RESULT model=dlrm eval_auc=0.7505"), "[worker 0] RESULT model=dlrm eval_auc=0.7505");
}

TEST(Console, TheClustersOwnLifeIsLeftOutAtVerbosityZeroAndKeptAtOne) {
  Console c;
  c.Configure(0, false);
  for (const char* line :
       {"[03:25:37.744] [info] coordinator: server 0 joined from tcp://127.0.0.1:35273 (host vm, pid 24233)",
        "[03:25:37.904] [info] coordinator: 12 tables created on 2 servers",
        "[03:25:38.316] [info] server: server 1: table emb.userId: 299 rows, 75232 bytes (sketch 0)",
        "[03:25:38.316] [info] server: server 1: shutting down",
        "[03:25:37.890] [info] worker: standardize: mean and stddev of 1 column from the first 86849 rows",
        "[03:25:38.273] [info] worker: trained 215 steps, 215260 samples in 0.4s"}) {
    EXPECT_EQ(Shown(c, "x", line), "") << line;
  }
  // Kept: the start of training, and any warning even if it looks alike.
  EXPECT_EQ(Shown(c, "coordinator", "[03:25:37.902] [info] coordinator: all 2 servers and 2 workers joined"),
            "[coordinator] all 2 servers and 2 workers joined");
  EXPECT_EQ(Shown(c, "server 0", "[03:25:38.316] [warning] server: server 0: shutting down"),
            "[server 0] warning: server 0: shutting down");
  Console v1;
  v1.Configure(1, false);
  const std::string raw = "[03:25:37.904] [info] coordinator: 12 tables created on 2 servers";
  EXPECT_EQ(Shown(v1, "coordinator", raw), "[coordinator] " + raw);
}

TEST(Console, CancellationsAfterTheUserStoppedAreNotNews) {
  Console c;
  c.Configure(0, false);
  const std::string line = "[03:25:38.316] [error] server: CANCELLED: server stopped";
  EXPECT_EQ(Shown(c, "server 0", line), "[server 0] error: CANCELLED: server stopped");
  c.Stopping();
  EXPECT_EQ(Shown(c, "server 0", line), "");
}

TEST(Console, TheLeadsProgressLinesAreMarkedForDrawingInPlace) {
  Console c;
  c.Configure(0, true);
  bool progress = false;
  EXPECT_EQ(Shown(c, "worker 0", "[03:25:38.084] [info] worker: step 913 | epoch 2/2 | 375.8k samples/s",
                  &progress),
            "[worker 0] step 913 | epoch 2/2 | 375.8k samples/s");
  EXPECT_TRUE(progress);
  Shown(c, "worker 0", "[03:25:38.084] [info] worker: stepped on a rake", &progress);
  EXPECT_FALSE(progress);
}

}  // namespace
}  // namespace pstrain::launcher
