// Tensor basics for the layers: non-owning row-major matrix views (which may
// point to host or device memory) and grow-only, 64-byte aligned host
// storage. Views are plain values; they never own memory and must not outlive
// the storage they point into. Not thread-safe (no shared state).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace pstrain::worker::nn {

inline constexpr size_t kTensorAlignment = 64;

// A rows x cols row-major float matrix whose rows start `stride` floats apart
// (stride >= cols). Columns(...) and Rows(...) cut sub-views without copying,
// e.g. one field's block of columns inside a concatenated activation.
struct MatrixView {
  float* data = nullptr;
  int rows = 0;
  int cols = 0;
  int stride = 0;

  MatrixView() = default;
  MatrixView(float* d, int r, int c) : data(d), rows(r), cols(c), stride(c) {}
  MatrixView(float* d, int r, int c, int s) : data(d), rows(r), cols(c), stride(s) {}

  float* row(int r) const { return data + static_cast<size_t>(r) * stride; }
  float& at(int r, int c) const { return row(r)[c]; }
  bool empty() const { return data == nullptr || rows == 0 || cols == 0; }
  bool contiguous() const { return stride == cols; }
  MatrixView Columns(int begin, int count) const {
    return MatrixView(data + begin, rows, count, stride);
  }
  MatrixView Rows(int begin, int count) const {
    return MatrixView(row(begin), count, cols, stride);
  }
};

// Read-only counterpart of MatrixView; a MatrixView converts implicitly.
struct ConstMatrixView {
  const float* data = nullptr;
  int rows = 0;
  int cols = 0;
  int stride = 0;

  ConstMatrixView() = default;
  ConstMatrixView(const float* d, int r, int c) : data(d), rows(r), cols(c), stride(c) {}
  ConstMatrixView(const float* d, int r, int c, int s) : data(d), rows(r), cols(c), stride(s) {}
  ConstMatrixView(const MatrixView& v)  // NOLINT(google-explicit-constructor)
      : data(v.data), rows(v.rows), cols(v.cols), stride(v.stride) {}

  const float* row(int r) const { return data + static_cast<size_t>(r) * stride; }
  float at(int r, int c) const { return row(r)[c]; }
  bool empty() const { return data == nullptr || rows == 0 || cols == 0; }
  bool contiguous() const { return stride == cols; }
  ConstMatrixView Columns(int begin, int count) const {
    return ConstMatrixView(data + begin, rows, count, stride);
  }
  ConstMatrixView Rows(int begin, int count) const {
    return ConstMatrixView(row(begin), count, cols, stride);
  }
};

// Grow-only, 64-byte aligned, uninitialized host array of trivially copyable
// T. resize() never shrinks the allocation, so a buffer reused every step
// stops allocating once it has seen the largest size. Move-only.
template <class T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) { resize(n); }
  ~AlignedBuffer() { std::free(data_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
    return *this;
  }

  // Contents are not preserved when the allocation grows.
  void resize(size_t n) {
    if (n > capacity_) {
      std::free(data_);
      size_t bytes = (n * sizeof(T) + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
      data_ = static_cast<T*>(std::aligned_alloc(kTensorAlignment, bytes));
      if (data_ == nullptr) throw std::bad_alloc();
      capacity_ = n;
    }
    size_ = n;
  }
  void fill_zero() {
    if (size_ > 0) std::memset(static_cast<void*>(data_), 0, size_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// An owning, aligned, contiguous host matrix (stride == cols). Resize keeps
// the allocation when it is large enough.
class Matrix {
 public:
  Matrix() = default;
  Matrix(int rows, int cols) { Resize(rows, cols); }

  void Resize(int rows, int cols) {
    rows_ = rows;
    cols_ = cols;
    buffer_.resize(static_cast<size_t>(rows) * cols);
  }
  void SetZero() { buffer_.fill_zero(); }

  int rows() const { return rows_; }
  int cols() const { return cols_; }
  size_t size() const { return buffer_.size(); }
  float* data() { return buffer_.data(); }
  const float* data() const { return buffer_.data(); }
  float& at(int r, int c) { return buffer_[static_cast<size_t>(r) * cols_ + c]; }
  float at(int r, int c) const { return buffer_[static_cast<size_t>(r) * cols_ + c]; }

  MatrixView view() { return MatrixView(data(), rows_, cols_); }
  ConstMatrixView view() const { return ConstMatrixView(data(), rows_, cols_); }

 private:
  AlignedBuffer<float> buffer_;
  int rows_ = 0;
  int cols_ = 0;
};

}  // namespace pstrain::worker::nn
