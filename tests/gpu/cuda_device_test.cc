// The CUDA device against the CPU reference: every op of nn::Device, forward
// and backward, on the same inputs: shapes that are not multiples of the
// kernels' block size (256 threads), strided views, a batch of one and an
// empty batch; embedding bags with repeated ids (the backward's atomics);
// and a CUDA error as a Status naming the call (whole model steps:
// cuda_model_step_test.cc). Label gpu; skipped, naming why, where no
// GPU (or no CUDA build) is available. Agreement: |gpu - cpu| <= 1e-4
// (1 + |cpu|) per element for the layers; for whole steps, 1e-4 relative to
// the largest element of each tensor (sums over hundreds of rows run in
// another order).
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/models/model.h"
#include "model/nn/device.h"
#include "model/nn/interaction.h"
#include "tests/model/models/model_test_util.h"
#include "tests/gpu/cuda_device_fixture.h"
#include "tests/gpu/expect_close.h"
#include "tests/model/nn/grad_check.h"

namespace pstrain::worker::nn {
namespace {

using testing::RandomVector;

TEST_F(CudaDeviceTest, LinearMatchesCpuForwardAndBackward) {
  struct Case {
    int batch, in, out, x_stride;
    Activation act;
    bool accumulate;
  };
  for (const Case c : {Case{37, 13, 64, 13, Activation::kRelu, false},
                       Case{64, 367, 64, 370, Activation::kRelu, true},
                       Case{50, 32, 1, 32, Activation::kNone, false},
                       Case{9, 5, 3, 8, Activation::kNone, true}}) {
    auto x = RandomVector(static_cast<size_t>(c.batch) * c.x_stride, rng_);
    auto w = RandomVector(static_cast<size_t>(c.out) * c.in, rng_);
    auto b = RandomVector(c.out, rng_);
    auto r = RandomVector(static_cast<size_t>(c.batch) * c.out, rng_);
    auto dw0 = RandomVector(w.size(), rng_), db0 = RandomVector(b.size(), rng_);
    // CPU reference.
    std::vector<float> y(r.size()), dy = r, dw = dw0, db = db0, dx(static_cast<size_t>(c.batch) * c.in);
    ConstMatrixView xv(x.data(), c.batch, c.in, c.x_stride);
    ASSERT_TRUE(cpu_->LinearForward(xv, w.data(), b.data(), c.act, MatrixView(y.data(), c.batch, c.out)).ok());
    ASSERT_TRUE(cpu_->LinearBackward(xv, w.data(), ConstMatrixView(y.data(), c.batch, c.out), c.act,
                                     MatrixView(dy.data(), c.batch, c.out), dw.data(), db.data(),
                                     MatrixView(dx.data(), c.batch, c.in), c.accumulate).ok());
    // GPU.
    float* gx = Up(x);
    float* gw = Up(w);
    float* gb = Up(b);
    float* gy = Up(std::vector<float>(r.size()));
    float* gdy = Up(r);
    float* gdw = Up(dw0);
    float* gdb = Up(db0);
    float* gdx = Up(std::vector<float>(dx.size()));
    ConstMatrixView gxv(gx, c.batch, c.in, c.x_stride);
    ASSERT_TRUE(gpu_->LinearForward(gxv, gw, gb, c.act, MatrixView(gy, c.batch, c.out)).ok());
    ASSERT_TRUE(gpu_->LinearBackward(gxv, gw, ConstMatrixView(gy, c.batch, c.out), c.act,
                                     MatrixView(gdy, c.batch, c.out), gdw, gdb,
                                     MatrixView(gdx, c.batch, c.in), c.accumulate).ok());
    const std::string what = "linear " + std::to_string(c.in) + "->" + std::to_string(c.out);
    ExpectClose(Down(gy, y.size()), y, what + " y");
    ExpectClose(Down(gdy, dy.size()), dy, what + " dz");
    ExpectClose(Down(gdw, dw.size()), dw, what + " dw");
    ExpectClose(Down(gdb, db.size()), db, what + " db");
    ExpectClose(Down(gdx, dx.size()), dx, what + " dx");
  }
}

TEST_F(CudaDeviceTest, ReluMatchesCpu) {
  auto x = RandomVector(7 * 11, rng_), dy = RandomVector(7 * 11, rng_);
  std::vector<float> y(x.size()), dx(x.size());
  ASSERT_TRUE(cpu_->ReluForward(ConstMatrixView(x.data(), 7, 11), MatrixView(y.data(), 7, 11)).ok());
  ASSERT_TRUE(cpu_->ReluBackward(ConstMatrixView(y.data(), 7, 11), ConstMatrixView(dy.data(), 7, 11),
                                 MatrixView(dx.data(), 7, 11)).ok());
  float* gx = Up(x);
  float* gy = Up(std::vector<float>(x.size()));
  float* gdy = Up(dy);
  float* gdx = Up(std::vector<float>(x.size()));
  ASSERT_TRUE(gpu_->ReluForward(ConstMatrixView(gx, 7, 11), MatrixView(gy, 7, 11)).ok());
  ASSERT_TRUE(gpu_->ReluBackward(ConstMatrixView(gy, 7, 11), ConstMatrixView(gdy, 7, 11),
                                 MatrixView(gdx, 7, 11)).ok());
  ExpectClose(Down(gy, y.size()), y, "relu y");
  ExpectClose(Down(gdx, dx.size()), dx, "relu dx");
}

TEST_F(CudaDeviceTest, EmbeddingBagMatchesCpu) {
  const int batch = 300, unique = 40, dim = 16, out_stride = 20;
  std::uniform_int_distribution<int> bag(0, 4), row(0, unique - 1);
  std::vector<uint32_t> index, offsets = {0};
  for (int b = 0; b < batch; ++b) {
    for (int k = bag(rng_); k > 0; --k) index.push_back(row(rng_));  // repeats: atomics
    offsets.push_back(static_cast<uint32_t>(index.size()));
  }
  auto rows = RandomVector(static_cast<size_t>(unique) * dim, rng_);
  auto out0 = RandomVector(static_cast<size_t>(batch) * out_stride, rng_);
  auto d_out = RandomVector(static_cast<size_t>(batch) * out_stride, rng_);
  for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
    for (bool accumulate : {false, true}) {
      std::vector<float> out = out0, d_rows(rows.size(), 0.0f);
      Bags cbags{index.data(), offsets.data(), batch};
      ASSERT_TRUE(cpu_->EmbeddingBagForward(rows.data(), cbags, pooling, accumulate,
                                            MatrixView(out.data(), batch, dim, out_stride)).ok());
      ASSERT_TRUE(cpu_->EmbeddingBagBackward(ConstMatrixView(d_out.data(), batch, dim, out_stride),
                                             cbags, pooling, d_rows.data()).ok());
      Bags gbags{Up(index), Up(offsets), batch};
      float* gout = Up(out0);
      float* gd_rows = Up(std::vector<float>(rows.size(), 0.0f));
      ASSERT_TRUE(gpu_->EmbeddingBagForward(Up(rows), gbags, pooling, accumulate,
                                            MatrixView(gout, batch, dim, out_stride)).ok());
      ASSERT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(Up(d_out), batch, dim, out_stride),
                                             gbags, pooling, gd_rows).ok());
      ExpectClose(Down(gout, out.size()), out, "embedding bag out");
      ExpectClose(Down(gd_rows, d_rows.size()), d_rows, "embedding bag d_rows");
    }
  }
}

TEST_F(CudaDeviceTest, DotInteractionMatchesCpu) {
  struct Case {
    int batch, n, dim;
  };
  for (const Case c : {Case{37, 27, 16}, Case{5, 4, 3}, Case{64, 9, 32}}) {
    const int in_width = c.n * c.dim, width = InteractionOutputWidth(c.n, c.dim);
    auto t = RandomVector(static_cast<size_t>(c.batch) * in_width, rng_);
    auto dz = RandomVector(static_cast<size_t>(c.batch) * width, rng_);
    std::vector<float> z(dz.size()), dt(t.size());
    ASSERT_TRUE(cpu_->DotInteractionForward(ConstMatrixView(t.data(), c.batch, in_width), c.n, c.dim,
                                            MatrixView(z.data(), c.batch, width)).ok());
    ASSERT_TRUE(cpu_->DotInteractionBackward(ConstMatrixView(t.data(), c.batch, in_width),
                                             ConstMatrixView(dz.data(), c.batch, width), c.n, c.dim,
                                             MatrixView(dt.data(), c.batch, in_width)).ok());
    float* gt = Up(t);
    float* gz = Up(std::vector<float>(z.size()));
    float* gdt = Up(std::vector<float>(dt.size()));
    ASSERT_TRUE(gpu_->DotInteractionForward(ConstMatrixView(gt, c.batch, in_width), c.n, c.dim,
                                            MatrixView(gz, c.batch, width)).ok());
    ASSERT_TRUE(gpu_->DotInteractionBackward(ConstMatrixView(gt, c.batch, in_width),
                                             ConstMatrixView(Up(dz), c.batch, width), c.n, c.dim,
                                             MatrixView(gdt, c.batch, in_width)).ok());
    ExpectClose(Down(gz, z.size()), z, "interaction z");
    ExpectClose(Down(gdt, dt.size()), dt, "interaction dt");
  }
}

TEST_F(CudaDeviceTest, LossAndSigmoidMatchCpu) {
  const int n = 1000;
  auto logits = RandomVector(n, rng_, -30.0f, 30.0f);
  std::vector<float> labels(n), dlogits(n), probs(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 3 == 0 ? 1.0f : 0.0f;
  auto loss = cpu_->SigmoidBceLoss(logits.data(), labels.data(), n, dlogits.data());
  ASSERT_TRUE(loss.ok());
  ASSERT_TRUE(cpu_->Sigmoid(logits.data(), n, probs.data()).ok());
  float* gl = Up(logits);
  float* gd = Up(std::vector<float>(n));
  float* gp = Up(std::vector<float>(n));
  auto gloss = gpu_->SigmoidBceLoss(gl, Up(labels), n, gd);
  ASSERT_TRUE(gloss.ok()) << gloss.status();
  ASSERT_TRUE(gpu_->Sigmoid(gl, n, gp).ok());
  EXPECT_NEAR(*gloss, *loss, 1e-4 * *loss);
  ExpectClose(Down(gd, n), dlogits, "dlogits");
  ExpectClose(Down(gp, n), probs, "probs");
}

TEST_F(CudaDeviceTest, CopyMatrixMatchesCpu) {
  auto src = RandomVector(6 * 10, rng_);
  std::vector<float> dst(6 * 12, 0.0f);
  ASSERT_TRUE(cpu_->CopyMatrix(ConstMatrixView(src.data() + 2, 6, 5, 10),
                               MatrixView(dst.data() + 3, 6, 5, 12)).ok());
  float* gdst = Up(std::vector<float>(6 * 12, 0.0f));
  ASSERT_TRUE(gpu_->CopyMatrix(ConstMatrixView(Up(src) + 2, 6, 5, 10), MatrixView(gdst + 3, 6, 5, 12)).ok());
  ExpectClose(Down(gdst, dst.size()), dst, "copy");
}

TEST_F(CudaDeviceTest, DropoutDropsTheCpusElementsOnStridedRows) {
  const int rows = 33, cols = 19, stride = 21;
  auto x = RandomVector(static_cast<size_t>(rows) * stride, rng_, 0.0f, 1.0f);
  auto dy = RandomVector(x.size(), rng_);
  std::vector<float> y = x, g = dy;
  ASSERT_TRUE(cpu_->DropoutForward(MatrixView(y.data(), rows, cols, stride), 0.3f, 123, 40).ok());
  ASSERT_TRUE(cpu_->DropoutBackward(ConstMatrixView(y.data(), rows, cols, stride),
                                    MatrixView(g.data(), rows, cols, stride), 0.3f).ok());
  float* gy = Up(x);
  float* gg = Up(dy);
  ASSERT_TRUE(gpu_->DropoutForward(MatrixView(gy, rows, cols, stride), 0.3f, 123, 40).ok());
  ASSERT_TRUE(gpu_->DropoutBackward(ConstMatrixView(gy, rows, cols, stride),
                                    MatrixView(gg, rows, cols, stride), 0.3f).ok());
  ExpectClose(Down(gy, y.size()), y, "dropout y");
  ExpectClose(Down(gg, g.size()), g, "dropout dy");
}

TEST_F(CudaDeviceTest, AddMatrixMatchesCpuOnStridedViews) {
  const int rows = 33, cols = 257, src_stride = 260, dst_stride = 259;
  auto src = RandomVector(static_cast<size_t>(rows) * src_stride, rng_);
  auto dst0 = RandomVector(static_cast<size_t>(rows) * dst_stride, rng_);
  std::vector<float> dst = dst0;
  ASSERT_TRUE(cpu_->AddMatrix(ConstMatrixView(src.data(), rows, cols, src_stride),
                              MatrixView(dst.data(), rows, cols, dst_stride)).ok());
  float* gdst = Up(dst0);
  ASSERT_TRUE(gpu_->AddMatrix(ConstMatrixView(Up(src), rows, cols, src_stride),
                              MatrixView(gdst, rows, cols, dst_stride)).ok());
  ExpectClose(Down(gdst, dst.size()), dst, "add");
}

TEST_F(CudaDeviceTest, CrossCombineMatchesCpuForwardAndBackward) {
  for (const int batch : {1, 37, 300}) {
    for (const bool accumulate : {false, true}) {
      const int width = 29;
      const size_t n = static_cast<size_t>(batch) * width;
      auto x0 = RandomVector(n, rng_), u = RandomVector(n, rng_), xl = RandomVector(n, rng_);
      auto g = RandomVector(n, rng_), dx0_init = RandomVector(n, rng_);
      std::vector<float> out(n), du(n), dx0 = dx0_init;
      ASSERT_TRUE(cpu_->CrossCombineForward(ConstMatrixView(x0.data(), batch, width),
                                            ConstMatrixView(u.data(), batch, width),
                                            ConstMatrixView(xl.data(), batch, width),
                                            MatrixView(out.data(), batch, width)).ok());
      ASSERT_TRUE(cpu_->CrossCombineBackward(ConstMatrixView(g.data(), batch, width),
                                             ConstMatrixView(x0.data(), batch, width),
                                             ConstMatrixView(u.data(), batch, width),
                                             MatrixView(du.data(), batch, width),
                                             MatrixView(dx0.data(), batch, width), accumulate).ok());
      float* gx0 = Up(x0);
      float* gu = Up(u);
      float* gout = Up(std::vector<float>(n));
      float* gdu = Up(std::vector<float>(n));
      float* gdx0 = Up(dx0_init);
      ASSERT_TRUE(gpu_->CrossCombineForward(ConstMatrixView(gx0, batch, width),
                                            ConstMatrixView(gu, batch, width),
                                            ConstMatrixView(Up(xl), batch, width),
                                            MatrixView(gout, batch, width)).ok());
      ASSERT_TRUE(gpu_->CrossCombineBackward(ConstMatrixView(Up(g), batch, width),
                                             ConstMatrixView(gx0, batch, width),
                                             ConstMatrixView(gu, batch, width),
                                             MatrixView(gdu, batch, width),
                                             MatrixView(gdx0, batch, width), accumulate).ok());
      const std::string what = "cross combine batch " + std::to_string(batch);
      ExpectClose(Down(gout, n), out, what + " out");
      ExpectClose(Down(gdu, n), du, what + " du");
      ExpectClose(Down(gdx0, n), dx0, what + " dx0");
    }
  }
}

TEST_F(CudaDeviceTest, FactorizationMachineMatchesCpuForwardAndBackward) {
  struct Case {
    int batch, n, dim;
  };
  for (const Case c : {Case{1, 3, 5}, Case{37, 26, 16}, Case{300, 7, 33}}) {
    for (const bool accumulate : {false, true}) {
      const int width = c.n * c.dim;
      auto t = RandomVector(static_cast<size_t>(c.batch) * width, rng_);
      auto dy = RandomVector(c.batch, rng_);
      auto out0 = RandomVector(c.batch, rng_), dt0 = RandomVector(t.size(), rng_);
      std::vector<float> out = out0, dt = dt0;
      ASSERT_TRUE(cpu_->FmForward(ConstMatrixView(t.data(), c.batch, width), c.n, c.dim, accumulate,
                                  MatrixView(out.data(), c.batch, 1)).ok());
      ASSERT_TRUE(cpu_->FmBackward(ConstMatrixView(t.data(), c.batch, width),
                                   ConstMatrixView(dy.data(), c.batch, 1), c.n, c.dim, accumulate,
                                   MatrixView(dt.data(), c.batch, width)).ok());
      float* gt = Up(t);
      float* gout = Up(out0);
      float* gdt = Up(dt0);
      ASSERT_TRUE(gpu_->FmForward(ConstMatrixView(gt, c.batch, width), c.n, c.dim, accumulate,
                                  MatrixView(gout, c.batch, 1)).ok());
      ASSERT_TRUE(gpu_->FmBackward(ConstMatrixView(gt, c.batch, width),
                                   ConstMatrixView(Up(dy), c.batch, 1), c.n, c.dim, accumulate,
                                   MatrixView(gdt, c.batch, width)).ok());
      const std::string what = "fm " + std::to_string(c.n) + "x" + std::to_string(c.dim);
      ExpectClose(Down(gout, out.size()), out, what + " out");
      ExpectClose(Down(gdt, dt.size()), dt, what + " dt");
    }
  }
}

TEST_F(CudaDeviceTest, OddShapesAndABatchOfOneMatchCpu) {
  // Sizes around the 256-thread block: one short of it, one past it.
  struct Case {
    int batch, in, out;
  };
  for (const Case c : {Case{1, 1, 1}, Case{1, 255, 257}, Case{257, 129, 33}, Case{255, 7, 1}}) {
    auto x = RandomVector(static_cast<size_t>(c.batch) * c.in, rng_);
    auto w = RandomVector(static_cast<size_t>(c.out) * c.in, rng_);
    auto b = RandomVector(c.out, rng_);
    auto r = RandomVector(static_cast<size_t>(c.batch) * c.out, rng_);
    std::vector<float> y(r.size()), dy = r, dw(w.size()), db(b.size()), dx(x.size());
    ConstMatrixView xv(x.data(), c.batch, c.in);
    ASSERT_TRUE(cpu_->LinearForward(xv, w.data(), b.data(), Activation::kRelu,
                                    MatrixView(y.data(), c.batch, c.out)).ok());
    ASSERT_TRUE(cpu_->LinearBackward(xv, w.data(), ConstMatrixView(y.data(), c.batch, c.out),
                                     Activation::kRelu, MatrixView(dy.data(), c.batch, c.out),
                                     dw.data(), db.data(), MatrixView(dx.data(), c.batch, c.in),
                                     false).ok());
    float* gx = Up(x);
    float* gw = Up(w);
    float* gy = Up(std::vector<float>(y.size()));
    float* gdy = Up(r);
    float* gdw = Up(std::vector<float>(w.size()));
    float* gdb = Up(std::vector<float>(b.size()));
    float* gdx = Up(std::vector<float>(dx.size()));
    ConstMatrixView gxv(gx, c.batch, c.in);
    ASSERT_TRUE(gpu_->LinearForward(gxv, gw, Up(b), Activation::kRelu,
                                    MatrixView(gy, c.batch, c.out)).ok());
    ASSERT_TRUE(gpu_->LinearBackward(gxv, gw, ConstMatrixView(gy, c.batch, c.out),
                                     Activation::kRelu, MatrixView(gdy, c.batch, c.out), gdw, gdb,
                                     MatrixView(gdx, c.batch, c.in), false).ok());
    const std::string what = "linear " + std::to_string(c.batch) + "x" + std::to_string(c.in) +
                             "->" + std::to_string(c.out);
    ExpectClose(Down(gy, y.size()), y, what + " y");
    ExpectClose(Down(gdw, dw.size()), dw, what + " dw");
    ExpectClose(Down(gdb, db.size()), db, what + " db");
    ExpectClose(Down(gdx, dx.size()), dx, what + " dx");
  }
  // An embedding bag of dim 7 (not a multiple of a warp) with one row, and
  // with one id repeated in every bag (the backward's atomics all collide).
  const int dim = 7;
  auto rows = RandomVector(3 * dim, rng_);
  for (const int batch : {1, 513}) {
    std::vector<uint32_t> index, offsets = {0};
    for (int r = 0; r < batch; ++r) {
      index.insert(index.end(), {1, 1, 2});
      offsets.push_back(static_cast<uint32_t>(index.size()));
    }
    auto d_out = RandomVector(static_cast<size_t>(batch) * dim, rng_);
    std::vector<float> out(d_out.size()), d_rows(rows.size(), 0.0f);
    Bags cbags{index.data(), offsets.data(), batch};
    ASSERT_TRUE(cpu_->EmbeddingBagForward(rows.data(), cbags, Pooling::kSum, false,
                                          MatrixView(out.data(), batch, dim)).ok());
    ASSERT_TRUE(cpu_->EmbeddingBagBackward(ConstMatrixView(d_out.data(), batch, dim), cbags,
                                           Pooling::kSum, d_rows.data()).ok());
    Bags gbags{Up(index), Up(offsets), batch};
    float* gout = Up(std::vector<float>(out.size()));
    float* gd_rows = Up(std::vector<float>(rows.size(), 0.0f));
    ASSERT_TRUE(gpu_->EmbeddingBagForward(Up(rows), gbags, Pooling::kSum, false,
                                          MatrixView(gout, batch, dim)).ok());
    ASSERT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(Up(d_out), batch, dim), gbags,
                                           Pooling::kSum, gd_rows).ok());
    ExpectClose(Down(gout, out.size()), out, "bag out, batch " + std::to_string(batch));
    // 2 x batch additions into row 1: float sums in another order.
    ExpectClose(Down(gd_rows, d_rows.size()), d_rows, "bag d_rows, batch " + std::to_string(batch),
                1e-3);
  }
}

TEST_F(CudaDeviceTest, AnEmptyBatchIsANoOpOnEveryOp) {
  // Zero rows: no kernel may be launched with zero blocks (an error), and
  // nothing is written.
  std::vector<float> sentinel(64, 7.0f);
  float* g = Up(sentinel);
  float* w = Up(RandomVector(4 * 3, rng_));
  float* b = Up(RandomVector(4, rng_));
  const uint32_t offsets[] = {0};
  Bags bags{Up(std::vector<uint32_t>{0}), Up(std::vector<uint32_t>(offsets, offsets + 1)), 0};
  EXPECT_TRUE(gpu_->LinearForward(ConstMatrixView(g, 0, 3), w, b, Activation::kRelu,
                                  MatrixView(g, 0, 4)).ok());
  EXPECT_TRUE(gpu_->LinearBackward(ConstMatrixView(g, 0, 3), w, ConstMatrixView(g, 0, 4),
                                   Activation::kRelu, MatrixView(g, 0, 4), g + 32, g + 48,
                                   MatrixView(g, 0, 3), /*accumulate=*/true).ok());
  EXPECT_TRUE(gpu_->ReluForward(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->EmbeddingBagForward(w, bags, Pooling::kMean, false, MatrixView(g, 0, 3)).ok());
  EXPECT_TRUE(gpu_->EmbeddingBagBackward(ConstMatrixView(g, 0, 3), bags, Pooling::kSum, g).ok());
  EXPECT_TRUE(gpu_->DotInteractionForward(ConstMatrixView(g, 0, 6), 2, 3, MatrixView(g, 0, 4)).ok());
  EXPECT_TRUE(gpu_->CopyMatrix(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->AddMatrix(ConstMatrixView(g, 0, 5), MatrixView(g, 0, 5)).ok());
  EXPECT_TRUE(gpu_->FmForward(ConstMatrixView(g, 0, 6), 2, 3, false, MatrixView(g, 0, 1)).ok());
  EXPECT_TRUE(gpu_->DropoutForward(MatrixView(g, 0, 5), 0.5f, 1, 0).ok());
  auto loss = gpu_->SigmoidBceLoss(g, g, 0, g);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_EQ(*loss, 0.0);
  EXPECT_TRUE(gpu_->Sigmoid(g, 0, g).ok());
  ASSERT_TRUE(gpu_->Synchronize().ok());
  // Nothing was written: every view had zero rows.
  std::vector<float> back = Down(g, sentinel.size());
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(back[i], 7.0f) << i;
}

TEST_F(CudaDeviceTest, AnAllocationTooLargeIsAStatusNamingTheCall) {
  // More than any GPU holds: cudaMalloc fails, the process goes on.
  auto p = gpu_->Allocate(size_t{1} << 50);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kResourceExhausted) << p.status();
  EXPECT_NE(p.status().message().find("cudaMalloc"), std::string::npos) << p.status();
  // The device still works after the error.
  std::vector<float> x = {1, -2, 3};
  float* gx = Up(x);
  float* gy = Up(std::vector<float>(3));
  ASSERT_TRUE(gpu_->ReluForward(ConstMatrixView(gx, 1, 3), MatrixView(gy, 1, 3)).ok());
  EXPECT_EQ(Down(gy, 3), (std::vector<float>{1, 0, 3}));
}

// Whole steps: a model on "cuda" and one on "cpu" with the same parameters.
}  // namespace
}  // namespace pstrain::worker::nn
