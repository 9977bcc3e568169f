// Pulls in half precision (KvClientOptions::pull_f16, --pull_dtype=fp16):
// every value a worker gets is the server's float rounded to the nearest
// half, whether the rows come from one server or several, into the
// caller's buffer or handed back, and the dense table whole or in pieces.
#include <random>

#include <gtest/gtest.h>

#include "common/half.h"
#include "common/optim/optimizer.h"
#include "tests/server/test_cluster.h"

namespace pstrain::testing {
namespace {

std::vector<TableSpec> Tables() {
  OptimizerConfig adagrad;
  adagrad.kind = OptimizerKind::kAdagrad;
  adagrad.lr = 0.05f;
  // Odd widths: rows of 5 halves are not 8-byte multiples.
  return {DenseSpec(0, "dense", 1000, adagrad), SparseSpec(1, "a", 4, adagrad),
          SparseSpec(2, "b", 5, adagrad)};
}

class PullF16 : public ::testing::TestWithParam<int> {};

TEST_P(PullF16, GivesTheServersFloatsRoundedToHalves) {
  const int servers = GetParam();
  TestCluster cluster(servers, 1, proto::Consistency::kAsp, 0, /*chunk=*/256);
  cluster.DefineTables(Tables());
  // Some training first, so the values are not the initializer's.
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<uint64_t> ids = {1, 5, 9, 1000, 77, 31337, 5};  // a duplicate too
  std::vector<uint64_t> unique = {1, 5, 9, 1000, 77, 31337};
  for (int step = 0; step < 3; ++step) {
    std::vector<float> dg(1000), a(unique.size() * 4), b(unique.size() * 5);
    for (float& v : dg) v = g(rng);
    for (float& v : a) v = g(rng);
    for (float& v : b) v = g(rng);
    ASSERT_TRUE(cluster.kv(0)
                    .Push({worker::DensePush{0, Buffer::FromVector(std::move(dg))}},
                          {worker::SparsePush{1, unique, Buffer::FromVector(std::move(a))},
                           worker::SparsePush{2, unique, Buffer::FromVector(std::move(b))}},
                          4, step)
                    .Wait()
                    .ok());
  }
  std::vector<std::string> endpoints;
  for (int s = 0; s < servers; ++s) endpoints.push_back("server" + std::to_string(s));
  worker::KvClientOptions ko;
  ko.request_timeout = absl::Seconds(20);
  ko.pull_f16 = true;
  worker::KvClient half(cluster.worker(0).node.get(), cluster.kv(0).layout(), endpoints, ko);

  // Floats, then halves: rows into the caller's buffers (a) and handed
  // back (b).
  auto pull = [&](worker::KvClient& kv, std::vector<float>* a, std::vector<float>* b,
                  std::vector<float>* dense) {
    a->assign(ids.size() * 4, -1.0f);
    std::vector<Buffer> rows;
    auto got = kv.Pull({0}, {worker::SparsePull{1, ids, a->data()}, worker::SparsePull{2, ids, nullptr}},
                       3)
                   .Wait(&rows);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(rows.size(), 2u);
    auto bv = rows[1].as<float>();
    b->assign(bv.begin(), bv.end());
    auto dv = got->at(0).as<float>();
    dense->assign(dv.begin(), dv.end());
  };
  std::vector<float> a32, b32, d32, a16, b16, d16;
  pull(cluster.kv(0), &a32, &b32, &d32);
  pull(half, &a16, &b16, &d16);
  ASSERT_EQ(b32.size(), ids.size() * 5);
  ASSERT_EQ(d32.size(), 1000u);
  auto rounded = [](const std::vector<float>& v) {
    std::vector<float> out;
    for (float x : v) out.push_back(HalfToFloat(FloatToHalf(x)));
    return out;
  };
  EXPECT_EQ(a16, rounded(a32));
  EXPECT_EQ(b16, rounded(b32));
  EXPECT_EQ(d16, rounded(d32));
  EXPECT_NE(d16, d32);  // the rounding did happen
}

INSTANTIATE_TEST_SUITE_P(Servers, PullF16, ::testing::Values(1, 3));

TEST(HalfConversion, BulkMatchesTheScalarRounding) {
  std::mt19937 rng(9);
  std::vector<float> v;
  for (int e = -30; e <= 17; ++e) {  // subnormal halves to past the largest
    for (int k = 0; k < 20; ++k) {
      v.push_back(std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, e) *
                  (k % 2 ? -1.0f : 1.0f));
    }
  }
  v.push_back(0.0f);
  v.push_back(65504.0f);
  v.push_back(65520.0f);  // rounds to infinity
  std::vector<uint16_t> h(v.size());
  FloatsToHalves(v.data(), h.data(), v.size());
  std::vector<float> back(v.size());
  HalvesToFloats(h.data(), back.data(), h.size());
  for (size_t i = 0; i < v.size(); ++i) {
    ASSERT_EQ(h[i], FloatToHalf(v[i])) << v[i];
    ASSERT_EQ(back[i], HalfToFloat(h[i])) << v[i];
  }
}

}  // namespace
}  // namespace pstrain::testing
