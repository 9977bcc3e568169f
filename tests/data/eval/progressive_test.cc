#include "data/eval/progressive.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "data/eval/metrics.h"

namespace pstrain::worker {
namespace {

struct Scored {
  std::vector<float> probs, labels;
};

Scored Sample(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  Scored s;
  for (int i = 0; i < n; ++i) {
    const float p = u(rng);
    s.probs.push_back(p);
    s.labels.push_back(u(rng) < p ? 1.0f : 0.0f);  // calibrated: AUC ~0.83
  }
  return s;
}

TEST(PartitionScore, AucAndLoglossMatchTheExactOnes) {
  Scored s = Sample(20000, 7);
  PartitionScore score;
  score.Add(s.probs, s.labels);
  EXPECT_EQ(score.rows(), 20000);
  EXPECT_NEAR(score.Auc(), RocAuc(s.probs, s.labels), 1e-4);
  EXPECT_NEAR(score.LogLoss(), LogLoss(s.probs, s.labels), 1e-9);
  EXPECT_GT(score.Auc(), 0.7);
}

TEST(PartitionScore, PartsMergeToTheWholeThroughTheirEncoding) {
  Scored a = Sample(5000, 1), b = Sample(3000, 2);
  PartitionScore whole, pa, pb;
  whole.Add(a.probs, a.labels);
  whole.Add(b.probs, b.labels);
  pa.Add(a.probs, a.labels);
  pa.set_trained_rows(5100);
  pb.Add(b.probs, b.labels);
  pb.set_trained_rows(3000);
  auto da = PartitionScore::Decode(pa.Encode(), "worker 0");
  auto db = PartitionScore::Decode(pb.Encode(), "worker 1");
  ASSERT_TRUE(da.ok() && db.ok());
  da->Merge(*db);
  EXPECT_EQ(da->rows(), 8000);
  EXPECT_EQ(da->trained_rows(), 8100);
  EXPECT_DOUBLE_EQ(da->Auc(), whole.Auc());
  EXPECT_NEAR(da->LogLoss(), whole.LogLoss(), 1e-12);
}

TEST(PartitionScore, UndefinedAucWithOneClassOrNoRows) {
  PartitionScore empty;
  EXPECT_TRUE(std::isnan(empty.Auc()));
  EXPECT_EQ(empty.LogLoss(), 0);
  PartitionScore ones;
  std::vector<float> p = {0.2f, 0.9f}, y = {1, 1};
  ones.Add(p, y);
  EXPECT_TRUE(std::isnan(ones.Auc()));
}

TEST(PartitionScore, ACorruptPartIsRefusedNamingItsWorker) {
  PartitionScore s;
  Scored a = Sample(100, 3);
  s.Add(a.probs, a.labels);
  Buffer good = s.Encode();
  std::string bytes(reinterpret_cast<const char*>(good.data()), good.size());
  for (size_t cut : {size_t{0}, size_t{10}, bytes.size() - 1}) {
    auto d = PartitionScore::Decode(Buffer::FromString(bytes.substr(0, cut)), "worker 3");
    EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(d.status().message().find("worker 3"), std::string::npos);
  }
  std::string bad = bytes;
  bad[bad.size() - 1] ^= 0x40;  // a count that no longer adds up to the rows
  EXPECT_FALSE(PartitionScore::Decode(Buffer::FromString(std::move(bad)), "w").ok());
}

}  // namespace
}  // namespace pstrain::worker
