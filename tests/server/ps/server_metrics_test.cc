// The parameter server's metrics: what a pull or push counts per table,
// BSP updates, sampled sizes and clocks, and the cost per request.
#include "server/ps/server_metrics.h"

#include <gtest/gtest.h>

#include "server/coordinator/table_layout.h"
#include "tests/common/prometheus_text.h"

namespace pstrain::server {
namespace {

// A DLRM-like job on one server: 26 sparse tables (dim 16) and one dense.
std::unique_ptr<KvStore> MakeStore(int sparse_tables, proto::Consistency consistency,
                                   uint32_t min_count = 1) {
  std::vector<TableSpec> tables;
  for (int i = 0; i < sparse_tables; ++i) {
    TableSpec t;
    t.id = static_cast<uint32_t>(tables.size());
    t.name = "emb.C" + std::to_string(i + 1);
    t.kind = TableKind::kSparse;
    t.dim = 16;
    t.admission.min_count = min_count;
    tables.push_back(t);
  }
  TableSpec d;
  d.id = static_cast<uint32_t>(tables.size());
  d.name = "top.0.weight";
  d.kind = TableKind::kDense;
  d.size = 1000;
  tables.push_back(d);
  auto layout = ComputeLayout(tables, 1, 1 << 16);
  EXPECT_TRUE(layout.ok()) << layout.status();
  layout->num_workers = 2;
  layout->consistency = consistency;
  auto store = KvStore::Create(*layout, 0);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

// One part per table: `ids` sparse ids each, the whole dense table.
std::vector<KvOp> Ops(const KvStore& store, const std::vector<uint64_t>& ids) {
  std::vector<KvOp> ops;
  for (const TableSpec& t : store.layout().tables) {
    KvOp op;
    op.table = t.id;
    op.sparse = t.kind == TableKind::kSparse;
    op.count = op.sparse ? ids.size() : t.size;
    if (op.sparse) op.ids = ids;
    ops.push_back(op);
  }
  return ops;
}

TEST(ServerMetrics, PullsAndPushesCountKeysBytesAndUpdatesPerTable) {
  metrics::Registry registry;
  ServerMetrics m(&registry);
  auto store = MakeStore(2, proto::Consistency::kAsp);
  m.OnTablesCreated(store->layout(), [&](uint32_t t) { return store->holds(t); });
  std::vector<uint64_t> ids = {1, 2, 3};
  m.BeginRequest();
  m.OnPullServed(Ops(*store, ids));
  m.BeginRequest();
  m.OnPushApplied(Ops(*store, ids), /*applied_now=*/true);
  proto::Heartbeat hb;
  const std::vector<TableStats> stats = store->Stats();
  m.Sample(&stats, {5, 2}, {false, false}, 0, &hb);
  testing::PromText p = testing::ParsePrometheusText(registry.Render());
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("pstrain_server_table_keys_total", {{"table", "emb.C1"}, {"op", "pull"}}), 3);
  // Pull: 3 ids in (8 bytes each) and 3 rows of 16 floats out.
  EXPECT_EQ(p.Value("pstrain_server_table_bytes_total", {{"table", "emb.C1"}, {"op", "pull"}}),
            3 * 8 + 3 * 16 * 4);
  EXPECT_EQ(p.Value("pstrain_server_table_bytes_total", {{"table", "top.0.weight"}, {"op", "push"}}),
            1000 * 4);
  EXPECT_EQ(p.Value("pstrain_server_optimizer_updates_total", {{"table", "emb.C2"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_request_seconds_count", {{"op", "pull"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_requests_total", {{"op", "push"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_clock_lead"), 3);
  EXPECT_EQ(p.Value("pstrain_server_table_rows", {{"table", "top.0.weight"}}), 1000);
  EXPECT_GT(p.Value("pstrain_server_table_memory_bytes", {{"table", "top.0.weight"}}), 4000);
  EXPECT_EQ(hb.requests, 2u);
  // Two sparse tables: their ids go in with the pull and again with the push,
  // plus both tables' sparse gradients and the dense gradient.
  EXPECT_EQ(hb.bytes_in, 2 * 2 * 3 * 8 + 2 * 3 * 16 * 4 + 1000 * 4u);
  EXPECT_EQ(hb.bytes_out, 2 * 3 * 16 * 4 + 1000 * 4u);
  EXPECT_GT(hb.table_bytes, 0u);
  EXPECT_GT(hb.rss_bytes, 0u);
}

TEST(ServerMetrics, AdmissionCountersAndSketchBytesPerTable) {
  metrics::Registry registry;
  ServerMetrics m(&registry);
  auto store = MakeStore(1, proto::Consistency::kAsp, /*min_count=*/2);
  m.OnTablesCreated(store->layout(), [&](uint32_t t) { return store->holds(t); });
  SparseTable* t = store->sparse(0);
  std::vector<uint64_t> ids = {1, 2, 3};
  std::vector<float> grads(ids.size() * 16, 0.1f);
  ASSERT_TRUE(t->Push(ids, grads.data(), 1.0f).ok());  // 3 refused
  ASSERT_TRUE(t->Push({ids.data(), 1}, grads.data(), 1.0f).ok());  // id 1 admitted
  proto::Heartbeat hb;
  const std::vector<TableStats> stats = store->Stats();
  m.Sample(&stats, {0, 0}, {false, false}, 0, &hb);
  testing::PromText p = testing::ParsePrometheusText(registry.Render());
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("pstrain_server_table_admitted_total", {{"table", "emb.C1"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_table_refused_ids_total", {{"table", "emb.C1"}}), 3);
  EXPECT_EQ(p.Value("pstrain_server_table_refused_pushes_total", {{"table", "emb.C1"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_table_admission_sketch_bytes", {{"table", "emb.C1"}}),
            1 << 20);
  EXPECT_EQ(p.Value("pstrain_server_table_rows", {{"table", "emb.C1"}}), 1);
}

TEST(ServerMetrics, BspCountsOneUpdatePerTablePerAppliedStep) {
  metrics::Registry registry;
  ServerMetrics m(&registry);
  auto store = MakeStore(1, proto::Consistency::kBsp);
  m.OnTablesCreated(store->layout(), [&](uint32_t t) { return store->holds(t); });
  std::vector<uint64_t> ids = {7};
  m.OnPushApplied(Ops(*store, ids), /*applied_now=*/false);  // worker 0's share
  m.OnPushApplied(Ops(*store, ids), /*applied_now=*/false);  // worker 1's share
  testing::PromText before = testing::ParsePrometheusText(registry.Render());
  EXPECT_EQ(before.Value("pstrain_server_optimizer_updates_total", {{"table", "emb.C1"}}), 0);
  m.OnBspStepApplied();
  testing::PromText after = testing::ParsePrometheusText(registry.Render());
  EXPECT_EQ(after.Value("pstrain_server_optimizer_updates_total", {{"table", "emb.C1"}}), 1);
  EXPECT_EQ(after.Value("pstrain_server_bsp_steps_total"), 1);
}

TEST(ServerMetrics, CheckpointWritesAreRecorded) {
  metrics::Registry registry;
  ServerMetrics m(&registry);
  m.RecordCheckpointWrite(1.5, 4096, true);
  m.RecordCheckpointWrite(0, 0, false);
  testing::PromText p = testing::ParsePrometheusText(registry.Render());
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.Value("pstrain_server_checkpoint_writes_total", {{"outcome", "ok"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_checkpoint_writes_total", {{"outcome", "failed"}}), 1);
  EXPECT_EQ(p.Value("pstrain_server_checkpoint_last_bytes"), 4096);
  EXPECT_EQ(p.Value("pstrain_server_checkpoint_write_seconds_sum"), 1.5);
}

// The whole per-request cost on the server's I/O thread for a DLRM pull
// (27 parts): two clock reads and a few atomic adds per part. A budget
// that catches a lock or an allocation creeping in, not a benchmark.
TEST(ServerMetrics, APullOfTwentySevenTablesCostsMicrosecondsAtMost) {
  metrics::Registry registry;
  ServerMetrics m(&registry);
  auto store = MakeStore(26, proto::Consistency::kAsp);
  m.OnTablesCreated(store->layout(), [&](uint32_t t) { return store->holds(t); });
  std::vector<uint64_t> ids(100);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::vector<KvOp> ops = Ops(*store, ids);
  constexpr int kN = 20000;
  int64_t t0 = metrics::MonotonicNanos();
  for (int i = 0; i < kN; ++i) {
    m.BeginRequest();
    m.OnPullServed(ops);
  }
  double us = static_cast<double>(metrics::MonotonicNanos() - t0) / kN / 1000;
  RecordProperty("us_per_request", std::to_string(us));
  std::printf("metrics cost per 27-table pull: %.2f us\n", us);
  EXPECT_LT(us, 20);
}

}  // namespace
}  // namespace pstrain::server
