#include "model/nn/concat.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

TEST(Concat, ForwardPlacesPartsSideBySideAndBackwardSplits) {
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8, 9, 10}, out(10);
  const ConstMatrixView parts[] = {ConstMatrixView(a.data(), 2, 2),
                                   ConstMatrixView(b.data(), 2, 3)};
  ConcatForward(parts, MatrixView(out.data(), 2, 5));
  EXPECT_EQ(out, (std::vector<float>{1, 2, 5, 6, 7, 3, 4, 8, 9, 10}));

  std::vector<float> da(4), db(6);
  const MatrixView d_parts[] = {MatrixView(da.data(), 2, 2), MatrixView(db.data(), 2, 3)};
  ConcatBackward(ConstMatrixView(out.data(), 2, 5), d_parts);
  EXPECT_EQ(da, a);
  EXPECT_EQ(db, b);
}

TEST(Concat, BackwardSkipsPartsWithoutGradient) {
  std::vector<float> d_out = {1, 2, 3, 4}, db(2, -1.0f);
  // The skipped part still takes its columns: a 1-wide view with null data.
  MatrixView skipped;
  skipped.cols = 1;
  const MatrixView parts2[] = {skipped, MatrixView(db.data(), 2, 1)};
  ConcatBackward(ConstMatrixView(d_out.data(), 2, 2), parts2);
  EXPECT_EQ(db, (std::vector<float>{2, 4}));
}

TEST(CopyMatrix, CopiesBetweenStridedViews) {
  std::vector<float> src = {1, 2, 0, 3, 4, 0}, dst(8, -1.0f);
  CopyMatrix(ConstMatrixView(src.data(), 2, 2, 3), MatrixView(dst.data() + 1, 2, 2, 4));
  EXPECT_EQ(dst, (std::vector<float>{-1, 1, 2, -1, -1, 3, 4, -1}));
}

TEST(Concat, GradientsMatchFiniteDifferences) {
  std::mt19937 rng(8);
  auto a = testing::RandomVector(3 * 2, rng), b = testing::RandomVector(3 * 4, rng);
  auto r = testing::RandomVector(3 * 6, rng);
  std::vector<float> out(3 * 6);
  auto loss = [&] {
    const ConstMatrixView parts[] = {ConstMatrixView(a.data(), 3, 2),
                                     ConstMatrixView(b.data(), 3, 4)};
    ConcatForward(parts, MatrixView(out.data(), 3, 6));
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * r[i];
    return s;
  };
  std::vector<float> da(a.size()), db(b.size());
  const MatrixView d_parts[] = {MatrixView(da.data(), 3, 2), MatrixView(db.data(), 3, 4)};
  ConcatBackward(ConstMatrixView(r.data(), 3, 6), d_parts);
  testing::ExpectGradientMatches(loss, a.data(), da, a.size(), "da");
  testing::ExpectGradientMatches(loss, b.data(), db, b.size(), "db");
}

}  // namespace
}  // namespace pstrain::worker::nn
