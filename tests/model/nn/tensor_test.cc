#include "model/nn/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace pstrain::worker::nn {
namespace {

TEST(MatrixView, ColumnsAndRowsAreStridedSubViews) {
  Matrix m(4, 6);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 6; ++c) m.at(r, c) = 10 * r + c;
  }
  MatrixView block = m.view().Columns(2, 3).Rows(1, 2);
  EXPECT_EQ(block.rows, 2);
  EXPECT_EQ(block.cols, 3);
  EXPECT_EQ(block.stride, 6);
  EXPECT_EQ(block.at(0, 0), 12.0f);
  EXPECT_EQ(block.at(1, 2), 24.0f);
  block.at(1, 1) = -1.0f;
  EXPECT_EQ(m.at(2, 3), -1.0f);
  ConstMatrixView read_only = block;
  EXPECT_EQ(read_only.at(1, 1), -1.0f);
  EXPECT_FALSE(block.contiguous());
  EXPECT_TRUE(m.view().contiguous());
}

TEST(Matrix, StorageIsAlignedAndReusedWhenShrinking) {
  Matrix m(100, 33);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % kTensorAlignment, 0u);
  const float* before = m.data();
  m.Resize(10, 33);
  EXPECT_EQ(m.data(), before);
  EXPECT_EQ(m.rows(), 10);
  m.SetZero();
  EXPECT_EQ(m.at(9, 32), 0.0f);
}

}  // namespace
}  // namespace pstrain::worker::nn
