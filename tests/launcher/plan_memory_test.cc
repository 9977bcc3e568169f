#include "launcher/plan_memory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "launcher/command.h"
#include "launcher/commands.h"
#include "model/models/model.h"
#include "server/ps/kv_store.h"
#include "server/ps/tables/row_footprint.h"
#include "server/ps/tables/row_index.h"

namespace pstrain::launcher {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

// DLRM's tables (26 embeddings of dim 16, adagrad) with `rows` rows each.
struct Job {
  std::vector<TableSpec> tables;
  std::vector<TableRows> rows;
};

Job Dlrm(uint64_t rows, OptimizerKind kind = OptimizerKind::kAdagrad,
         RowDtype dtype = RowDtype::kFloat32) {
  worker::ModelOptions m;
  m.name = "dlrm";
  m.device = "cpu";
  m.sparse_optimizer.kind = kind;
  auto model = worker::CreateModel(m);
  EXPECT_TRUE(model.ok()) << model.status();
  Job job;
  job.tables = (*model)->tables();
  job.rows.resize(job.tables.size());
  for (TableSpec& t : job.tables) {
    if (t.kind != TableKind::kSparse) continue;
    t.dtype = dtype;
    job.rows[t.id] = {rows, "hash_buckets"};
  }
  return job;
}

const TableSizing& First(const MemoryPlan& plan) { return plan.tables.front(); }

TEST(PlanMemory, ATableTakesRowsTimesDimTimesValueBytesTimesOnePlusState) {
  Job job = Dlrm(1000000);
  auto plan = PlanServerMemory(job.tables, job.rows, 64 * kGiB, 0.25);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const TableSizing& t = First(*plan);
  EXPECT_EQ(t.name, "emb.C1");
  EXPECT_EQ(t.rows, 1000000u);
  EXPECT_EQ(t.width, 16u);
  EXPECT_DOUBLE_EQ(t.value_bytes, 1e6 * 16 * 4);
  EXPECT_DOUBLE_EQ(t.state_bytes, 1e6 * 16 * 4);  // adagrad: one accumulator a value
  // The index slot at its lowest load plus the chunks' slack: 22.5 to 23 bytes.
  EXPECT_GE(t.overhead_bytes, 1e6 * server::RowIndex::kMaxBytesPerId);
  EXPECT_LE(t.overhead_bytes, 1e6 * (server::RowIndex::kMaxBytesPerId + 0.5));
  int sparse = 0;
  for (const TableSizing& s : plan->tables) sparse += s.sparse;
  EXPECT_EQ(sparse, 26);
  // The dense tables: 27 601 floats and as many accumulators.
  double dense = 0;
  for (const TableSizing& s : plan->tables) dense += s.sparse ? 0 : s.total();
  EXPECT_DOUBLE_EQ(dense, 27601.0 * 4 * 2);
  EXPECT_NEAR(plan->total(), 26 * t.total() + dense, 1);
}

TEST(PlanMemory, OptimizerStateAndDtypeChangeTheBytesOfARow) {
  auto row = [](OptimizerKind kind, RowDtype dtype) {
    Job job = Dlrm(1000, kind, dtype);
    auto plan = PlanServerMemory(job.tables, job.rows, 64 * kGiB, 0.25);
    EXPECT_TRUE(plan.ok()) << plan.status();
    const TableSizing& t = First(*plan);
    return std::make_pair(t.value_bytes / 1000, t.state_bytes / 1000);
  };
  EXPECT_EQ(row(OptimizerKind::kSgd, RowDtype::kFloat32), std::make_pair(64.0, 0.0));
  EXPECT_EQ(row(OptimizerKind::kAdagrad, RowDtype::kFloat32), std::make_pair(64.0, 64.0));
  EXPECT_EQ(row(OptimizerKind::kAdam, RowDtype::kFloat32), std::make_pair(64.0, 132.0));
  EXPECT_EQ(row(OptimizerKind::kFtrl, RowDtype::kFloat32), std::make_pair(64.0, 128.0));
  EXPECT_EQ(row(OptimizerKind::kRowwiseAdagrad, RowDtype::kFloat32), std::make_pair(64.0, 4.0));
  EXPECT_EQ(row(OptimizerKind::kAdagrad, RowDtype::kFloat16), std::make_pair(32.0, 64.0));
}

TEST(PlanMemory, ServersAreTheFewestWhoseShareFitsTheirMemoryLessTheHeadroom) {
  Job job = Dlrm(10000000);  // 26 x 10 M rows: about 36 GiB
  auto plan = PlanServerMemory(job.tables, job.rows, 16 * kGiB, 0.25);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const double usable = 0.75 * 16 * kGiB;
  EXPECT_GT(plan->total(), 35 * kGiB);
  EXPECT_DOUBLE_EQ(plan->fixed_per_server,
                   server::KvStore::kProcessBytes + 26 * server::kShardFixedBytes);
  EXPECT_LE(plan->per_server, usable);
  EXPECT_GT(plan->total() / (plan->servers - 1) + plan->fixed_per_server, usable);
  EXPECT_EQ(plan->servers, 4);
  // No headroom: the same tables fit in fewer.
  auto tight = PlanServerMemory(job.tables, job.rows, 16 * kGiB, 0);
  ASSERT_TRUE(tight.ok());
  EXPECT_EQ(tight->servers, 3);
}

TEST(PlanMemory, AServerTooSmallForItsFixedPartIsRefused) {
  Job job = Dlrm(1000);
  auto plan = PlanServerMemory(job.tables, job.rows, 200 << 20, 0.25);  // 150 MiB < 220 MiB
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("--server_memory"), std::string::npos);
}

TEST(PlanMemory, AllreduceKeepsTheDenseTablesOffTheServers) {
  Job job = Dlrm(1000);
  for (TableSpec& t : job.tables) t.on_workers = t.kind == TableKind::kDense;
  auto plan = PlanServerMemory(job.tables, job.rows, 64 * kGiB, 0.25);
  ASSERT_TRUE(plan.ok());
  for (const TableSizing& s : plan->tables) EXPECT_TRUE(s.sparse) << s.name;
}

TEST(PlanMemory, RowsComeFromTheBucketsMaxRowsOrTheExpectedCount) {
  TableSpec t;
  t.name = "emb.C3";
  t.kind = TableKind::kSparse;
  t.dim = 16;
  const std::map<std::string, uint64_t> buckets = {{"C1", 0}, {"C3", 5000000}};
  auto hashed = RowsOfTable(t, buckets, 0);
  ASSERT_TRUE(hashed.ok());
  EXPECT_EQ(hashed->rows, 5000000u);
  EXPECT_EQ(hashed->from, "hash_buckets");
  EXPECT_EQ(RowsOfTable(t, buckets, 2000000)->from, "--rows");  // fewer distinct than buckets
  EXPECT_EQ(RowsOfTable(t, buckets, 9000000)->rows, 5000000u);
  t.eviction.max_rows = 1000000;
  EXPECT_EQ(RowsOfTable(t, buckets, 0)->from, "max_rows");
  t.eviction.max_rows = 0;
  auto unbounded = RowsOfTable(t, {}, 0);
  ASSERT_FALSE(unbounded.ok());
  EXPECT_EQ(unbounded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unbounded.status().message().find("emb.C3"), std::string::npos);
  EXPECT_NE(unbounded.status().message().find("--rows"), std::string::npos);
  EXPECT_EQ(RowsOfTable(t, {}, 7000)->rows, 7000u);
}

TEST(PlanMemory, TablesNamedAfterSchemaColumnsTakeTheirColumnsBuckets) {
  TableSpec t;
  t.name = "emb.carrier";
  t.kind = TableKind::kSparse;
  t.dim = 16;
  auto rows = RowsOfTable(t, {{"origin", 100}, {"carrier", 2000}}, 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->rows, 2000u);
  EXPECT_EQ(rows->from, "hash_buckets");
}

TEST(PlanMemory, RowCountsTakeDecimalSuffixes) {
  EXPECT_EQ(*ParseRowCount("rows", "50M"), 50000000u);
  EXPECT_EQ(*ParseRowCount("rows", "2.5k"), 2500u);
  EXPECT_EQ(*ParseRowCount("rows", "1e8"), 100000000u);
  EXPECT_EQ(*ParseRowCount("rows", "123"), 123u);
  for (const char* bad : {"", "abc", "0", "-5", "5X"}) {
    auto r = ParseRowCount("rows", bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find(std::string("--rows=") + bad), std::string::npos);
  }
}

TEST(PlanMemory, TheCommandRefusesABadSizeNamingTheFlag) {
  absl::Status st = RunPlan({"--server_memory=64XB", "--model=dlrm", "--hash_buckets=1000"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_EQ(st.message(), "--server_memory=64XB: expected a size like 64GiB (K, M, G, T: powers of 1024)");
  st = RunPlan({"--server_memory=64GiB", "--model=dlrm"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find("--rows"), std::string::npos);
  st = RunPlan({"--server_memory=64GiB", "--server_headroom=1.5", "--model=dlrm", "--rows=10"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find("--server_headroom=1.5"), std::string::npos);
}

TEST(PlanMemory, TheCommandPrintsOneJsonObjectWithTheJobsTables) {
  testing::internal::CaptureStdout();
  absl::Status st = RunPlan({"--server_memory=8GiB", "--model=dlrm", "--hash_buckets=2000000",
                             "--optimizer=adam", "--embedding_dtype=fp16", "--json"});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(st.ok()) << st;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["plan"], "memory");
  EXPECT_EQ(j["model"], "dlrm");
  const auto& t = j["tables"][0];
  EXPECT_EQ(t["name"], "emb.C1");
  EXPECT_EQ(t["rows"], 2000000);
  EXPECT_EQ(t["rows_from"], "hash_buckets");
  EXPECT_EQ(t["optimizer"], "adam");
  EXPECT_EQ(t["dtype"], "fp16");
  EXPECT_DOUBLE_EQ(t["value_bytes"].get<double>(), 2e6 * 16 * 2);
  EXPECT_DOUBLE_EQ(t["state_bytes"].get<double>(), 2e6 * (2 * 16 * 4 + 4));
  // 26 tables of 2 M rows x (32 + 132 + ~23) bytes = 9.7 GB over servers of 6 GiB usable.
  EXPECT_EQ(j["servers"], 2);
  EXPECT_LE(j["bytes_per_server"].get<double>(), 0.75 * 8 * kGiB);
}

TEST(PlanMemory, TheCommandSizesTheTablesOfASchemaByTheirColumnsBuckets) {
  const std::string dir = ::testing::TempDir() + "/plan_memory_schema";
  std::filesystem::create_directories(dir);
  {
    std::ofstream(dir + "/schema.json")
        << R"({"format": "csv", "header": true, "label": "clicked", "dense": ["age"],
              "sparse": [{"column": "carrier", "hash_buckets": 3000}, "origin"],
              "hash_buckets": 500})";
    std::ofstream(dir + "/rows.csv") << "clicked,age,carrier,origin\n1,31,AA,SFO\n0,45,UA,JFK\n";
  }
  testing::internal::CaptureStdout();
  absl::Status st = RunPlan({"--server_memory=8GiB", "--schema=" + dir + "/schema.json",
                             "--train_data=" + dir + "/rows.csv", "--json"});
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(st.ok()) << st;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["tables"][0]["name"], "emb.carrier");
  EXPECT_EQ(j["tables"][0]["rows"], 3000);
  EXPECT_EQ(j["tables"][1]["name"], "emb.origin");
  EXPECT_EQ(j["tables"][1]["rows"], 500);
  // Without the data the schema's columns are unknown: a usage error that says so.
  st = RunPlan({"--server_memory=8GiB", "--schema=" + dir + "/schema.json"});
  EXPECT_EQ(ExitCodeOf(st), 2);
  EXPECT_NE(st.message().find("--schema needs --train_data"), std::string::npos) << st;
}

}  // namespace
}  // namespace pstrain::launcher
