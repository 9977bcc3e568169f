#include "serve/model_versions.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "serve/model_server.h"
#include "serve/scorer.h"
#include "tests/serve/random_model.h"

namespace pstrain::worker {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kNewId = 1'000'003;

SavedModel Base(uint64_t seq) {
  SavedModel m = RandomModel();
  m.exported = ExportInfo{seq, false, seq, 1000};
  return m;
}

// Version seq on top of `prev`: in every sparse table row ids[0] changes,
// kNewId + table arrives and ids[1] is removed; dense tables change.
SavedModel DeltaOn(const SavedModel& prev, uint64_t seq) {
  SavedModel d = prev;
  d.step = prev.step + 10;
  d.exported = ExportInfo{seq, true, prev.exported.base, 2000};
  for (TableValues& t : d.tables) {
    if (t.spec.kind == TableKind::kDense) {
      for (float& v : t.dense) v += 0.01f * static_cast<float>(seq);
      continue;
    }
    const size_t dim = t.spec.dim;
    std::vector<float> changed(t.rows.begin(), t.rows.begin() + dim);
    for (float& v : changed) v = 0.5f + static_cast<float>(seq);
    std::vector<float> fresh(dim, -0.25f * static_cast<float>(seq));
    t.removed = {t.ids[1]};
    t.ids = {t.ids[0], kNewId + t.spec.id};
    t.rows = changed;
    t.rows.insert(t.rows.end(), fresh.begin(), fresh.end());
  }
  return d;
}

// A batch of one row per sparse table id position: field f reads the f-th
// sparse table's ids[k], kNewId + table and the removed id.
Batch BatchOver(const SavedModel& base) {
  Batch b;
  b.num_dense = base.model.num_dense;
  b.num_sparse = base.model.num_sparse;
  b.size = 4;
  b.labels.assign(b.size, 0);
  b.dense.assign(b.size * b.num_dense, 0.5f);
  b.ids.resize(b.num_sparse);
  b.offsets.resize(b.num_sparse);
  int f = 0;
  for (const TableValues& t : base.tables) {
    if (t.spec.kind != TableKind::kSparse || f >= b.num_sparse) continue;
    const uint64_t ids[4] = {t.ids[0], t.ids[1], t.ids[2], kNewId + t.spec.id};
    b.offsets[f].push_back(0);
    for (int r = 0; r < b.size; ++r) {
      b.ids[f].push_back(ids[r]);
      b.offsets[f].push_back(static_cast<uint32_t>(b.ids[f].size()));
    }
    ++f;
  }
  return b;
}

std::vector<float> Scores(const LoadedModel& m, const Batch& batch) {
  auto scratch = m.AcquireScratch();
  EXPECT_TRUE(scratch.ok()) << scratch.status();
  std::vector<float> probs;
  absl::Status s = m.Score(batch, scratch->get(), &probs);
  EXPECT_TRUE(s.ok()) << s;
  m.ReleaseScratch(*std::move(scratch));
  return probs;
}

void FlipAByte(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(40);
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(40);
  f.write(&c, 1);
}

class ModelVersionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("pstrain-versions-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(ModelVersionsTest, ABaseAndItsDeltasReadAsTheWholeModel) {
  SavedModel v1 = Base(1);
  SavedModel v2 = DeltaOn(v1, 2);
  SavedModel v3 = DeltaOn(v1, 3);
  v3.exported.base = 1;
  ASSERT_TRUE(WriteVersion(dir_, v1).ok());
  EXPECT_TRUE(IsVersionedExport(dir_));
  ASSERT_TRUE(WriteVersion(dir_, v2).ok());
  ASSERT_TRUE(WriteVersion(dir_, v3).ok());
  auto latest = ReadLatest(dir_);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, 3u);
  auto info = ReadVersionInfo(dir_, 2);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->delta);
  EXPECT_EQ(info->base, 1u);

  auto whole = ReadVersionedModel(dir_);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->step, v3.step);
  EXPECT_EQ(whole->exported.seq, 3u);
  for (size_t i = 0; i < v1.tables.size(); ++i) {
    const TableValues& got = whole->tables[i];
    if (got.spec.kind == TableKind::kDense) {
      EXPECT_EQ(got.dense, v3.tables[i].dense);
      continue;
    }
    const size_t dim = got.spec.dim;
    // 5 rows, one removed, one new: ids[0] with v3's values, ids[2..4]
    // unchanged, the new id with v3's.
    ASSERT_EQ(got.ids.size(), 5u) << got.spec.name;
    for (size_t r = 0; r < got.ids.size(); ++r) {
      const uint64_t id = got.ids[r];
      std::vector<float> row(got.rows.begin() + r * dim, got.rows.begin() + (r + 1) * dim);
      EXPECT_NE(id, v1.tables[i].ids[1]) << "a removed id came back";
      if (id == v1.tables[i].ids[0]) {
        EXPECT_EQ(row, std::vector<float>(v3.tables[i].rows.begin(), v3.tables[i].rows.begin() + dim));
      } else if (id == kNewId + got.spec.id) {
        EXPECT_EQ(row, std::vector<float>(dim, -0.75f));
      } else {
        auto at = std::find(v1.tables[i].ids.begin(), v1.tables[i].ids.end(), id);
        ASSERT_NE(at, v1.tables[i].ids.end());
        const size_t k = at - v1.tables[i].ids.begin();
        EXPECT_EQ(row, std::vector<float>(v1.tables[i].rows.begin() + k * dim,
                                          v1.tables[i].rows.begin() + (k + 1) * dim));
      }
    }
  }
}

TEST_F(ModelVersionsTest, ADeltaOnTheWrongVersionIsRefused) {
  SavedModel v1 = Base(1);
  SavedModel v3 = DeltaOn(v1, 3);
  absl::Status s = ApplyDelta(&v1, v3);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  SavedModel other = Base(1);
  SavedModel d = DeltaOn(other, 2);
  d.tables.pop_back();
  EXPECT_TRUE(absl::IsFailedPrecondition(ApplyDelta(&other, d)));
}

TEST_F(ModelVersionsTest, PruningKeepsTheNewestBasesAndTheirDeltas) {
  SavedModel v1 = Base(1);
  ASSERT_TRUE(WriteVersion(dir_, v1).ok());
  ASSERT_TRUE(WriteVersion(dir_, DeltaOn(v1, 2)).ok());
  ASSERT_TRUE(WriteVersion(dir_, Base(3)).ok());
  SavedModel v3 = Base(3);
  ASSERT_TRUE(WriteVersion(dir_, DeltaOn(v3, 4)).ok());
  ASSERT_TRUE(WriteVersion(dir_, Base(5)).ok());
  fs::create_directories(fs::path(dir_) / "v00000002.tmp");  // a crashed writer's
  auto removed = PruneVersions(dir_, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "v00000001"));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "v00000002"));
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "v00000002.tmp"));
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "v00000003"));
  EXPECT_TRUE(fs::exists(fs::path(dir_) / "v00000004"));
  EXPECT_TRUE(ReadVersionedModel(dir_, 4).ok());
  EXPECT_TRUE(ReadVersionedModel(dir_).ok());
}

TEST_F(ModelVersionsTest, LatestThatNamesNoVersionIsRefusedWithTheFile) {
  ASSERT_TRUE(WriteVersion(dir_, Base(1)).ok());
  std::ofstream(fs::path(dir_) / "LATEST") << "yesterday\n";
  auto latest = ReadLatest(dir_);
  ASSERT_FALSE(latest.ok());
  EXPECT_NE(latest.status().message().find("LATEST"), std::string::npos) << latest.status();
}

TEST_F(ModelVersionsTest, AModelWithADeltaAppliedScoresAsTheWholeVersion) {
  SavedModel v1 = Base(1);
  SavedModel v2 = DeltaOn(v1, 2);
  SavedModel whole = v1;
  ASSERT_TRUE(ApplyDelta(&whole, v2).ok());
  auto served = LoadedModel::FromSaved(v1, "v00000001");
  ASSERT_TRUE(served.ok()) << served.status();
  auto copy = (*served)->Clone();
  ASSERT_TRUE(copy.ok()) << copy.status();
  auto expect = LoadedModel::FromSaved(whole, "v00000002");
  ASSERT_TRUE(expect.ok()) << expect.status();
  const Batch batch = BatchOver(v1);
  const std::vector<float> before = Scores(**served, batch);
  ASSERT_TRUE((*served)->ApplyDelta(v2).ok());
  EXPECT_EQ((*served)->version(), "v00000002");
  EXPECT_EQ((*served)->step(), v2.step);
  EXPECT_EQ((*served)->sparse_rows(), (*expect)->sparse_rows());
  const std::vector<float> after = Scores(**served, batch);
  EXPECT_EQ(after, Scores(**expect, batch));
  EXPECT_NE(after, before);
  // The copy made before is the old version still, and catches up alike.
  EXPECT_EQ(Scores(**copy, batch), before);
  ASSERT_TRUE((*copy)->ApplyDelta(v2).ok());
  EXPECT_EQ(Scores(**copy, batch), after);
  // A delta applied twice is refused, leaving the model as it was.
  EXPECT_TRUE(absl::IsFailedPrecondition((*served)->ApplyDelta(v2)));
  EXPECT_EQ(Scores(**served, batch), after);
}

TEST_F(ModelVersionsTest, ServeAppliesDeltasAndKeepsTheVersionWhenOneIsCorrupt) {
  SavedModel v1 = Base(1);
  ASSERT_TRUE(WriteVersion(dir_, v1).ok());
  ServeOptions options;
  options.model_dir = dir_;
  options.poll = absl::Hours(1);  // the test looks itself
  auto server = ModelServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_NE((*server)->current(), nullptr);
  EXPECT_EQ((*server)->current()->model->version(), "v00000001");
  const Batch batch = BatchOver(v1);

  SavedModel v2 = DeltaOn(v1, 2);
  ASSERT_TRUE(WriteVersion(dir_, v2).ok());
  ASSERT_TRUE((*server)->CheckForNewVersion().ok());
  SavedModel whole = v1;
  ASSERT_TRUE(ApplyDelta(&whole, v2).ok());
  auto expect2 = LoadedModel::FromSaved(whole, "v00000002");
  ASSERT_TRUE(expect2.ok());
  EXPECT_EQ((*server)->current()->model->version(), "v00000002");
  EXPECT_EQ(Scores(*(*server)->current()->model, batch), Scores(**expect2, batch));

  // Two deltas at once (the standby, one behind, catches up first).
  SavedModel v3 = DeltaOn(whole, 3);
  ASSERT_TRUE(ApplyDelta(&whole, v3).ok());
  SavedModel v4 = DeltaOn(whole, 4);
  ASSERT_TRUE(ApplyDelta(&whole, v4).ok());
  ASSERT_TRUE(WriteVersion(dir_, v3).ok());
  ASSERT_TRUE(WriteVersion(dir_, v4).ok());
  ASSERT_TRUE((*server)->CheckForNewVersion().ok());
  auto expect4 = LoadedModel::FromSaved(whole, "v00000004");
  ASSERT_TRUE(expect4.ok());
  EXPECT_EQ((*server)->current()->model->version(), "v00000004");
  EXPECT_EQ(Scores(*(*server)->current()->model, batch), Scores(**expect4, batch));

  // A corrupt delta: refused, naming the file; version 4 stays.
  SavedModel v5 = DeltaOn(whole, 5);
  ASSERT_TRUE(WriteVersion(dir_, v5).ok());
  FlipAByte(fs::path(dir_) / "v00000005" / (v5.tables.back().spec.name + ".tbl"));
  absl::Status refused = (*server)->CheckForNewVersion();
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("v00000005"), std::string::npos) << refused;
  EXPECT_EQ((*server)->current()->model->version(), "v00000004");
  EXPECT_EQ(Scores(*(*server)->current()->model, batch), Scores(**expect4, batch));

  // A new base is loaded whole.
  SavedModel v6 = Base(6);
  ASSERT_TRUE(WriteVersion(dir_, v6).ok());
  ASSERT_TRUE((*server)->CheckForNewVersion().ok());
  auto expect6 = LoadedModel::FromSaved(v6, "v00000006");
  ASSERT_TRUE(expect6.ok());
  EXPECT_EQ((*server)->current()->model->version(), "v00000006");
  EXPECT_EQ(Scores(*(*server)->current()->model, batch), Scores(**expect6, batch));
  (*server)->Stop();
}

}  // namespace
}  // namespace pstrain::worker
