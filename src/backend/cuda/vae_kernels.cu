#include <algorithm>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/vae_kernels.h"

namespace ms::cuda {
namespace {

// Rows along the grid's y, columns along x: no division per element.
__global__ void fill_rows_kernel(float* y, const float* b, int64_t rows, int64_t cols) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const float v = b ? b[r] : 0.f;
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < cols; c += int64_t(gridDim.x) * blockDim.x)
      y[r * cols + c] = v;
  }
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

// One block per row, in place.
__global__ void softmax_rows_kernel(float* s, int64_t n, float scale) {
  __shared__ float smem[kRowThreads / 32];
  float* row = s + int64_t(blockIdx.x) * n;  // [n]
  block_softmax_row(
      n, [&](int64_t j) { return scale * row[j]; }, [&](int64_t j, float v) { row[j] = v; }, smem);
}

}  // namespace

void fill_rows(float* y, const float* b, int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return;
  const dim3 grid(unsigned(std::min<int64_t>((cols + 255) / 256, 64)), unsigned(std::min<int64_t>(rows, 65535)));
  fill_rows_kernel<<<grid, 256, 0, stream>>>(y, b, rows, cols);
  MS_CUDA_CHECK_LAUNCH();
}

void add_into(float* y, const float* x, int64_t n, Stream stream) {
  if (n == 0) return;
  add_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(y, x, n);
  MS_CUDA_CHECK_LAUNCH();
}

void softmax_rows(float* s, int64_t rows, int64_t n, float scale, Stream stream) {
  if (rows * n == 0) return;
  MS_CHECK(rows <= 0x7fffffff, "softmax_rows: ", rows, " rows is over the grid's limit");
  softmax_rows_kernel<<<unsigned(rows), kRowThreads, 0, stream>>>(s, n, scale);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
