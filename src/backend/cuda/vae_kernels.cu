#include <cfloat>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/vae_kernels.h"

namespace ms::cuda {
namespace {

__global__ void fill_rows_kernel(float* y, const float* b, int64_t rows, int64_t cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = b ? b[i / cols] : 0.f;
}

__global__ void add_kernel(float* y, const float* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

// One block per row: the max, the sum of exp(scale (v - max)), then the row divided by it.
__global__ void softmax_rows_kernel(float* s, int64_t n, float scale) {
  __shared__ float smem[kRowThreads / 32];
  float* row = s + int64_t(blockIdx.x) * n;  // [n]
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) m = fmaxf(m, row[j]);
  m = block_reduce<kRowThreads>(
      m, smem, [](float a, float b) { return fmaxf(a, b); }, -FLT_MAX);
  __syncthreads();
  float z = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) z += __expf(scale * (row[j] - m));
  const float inv = 1.f / block_sum(z, smem);
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) row[j] = __expf(scale * (row[j] - m)) * inv;
}

}  // namespace

void fill_rows(float* y, const float* b, int64_t rows, int64_t cols, Stream stream) {
  if (rows * cols == 0) return;
  fill_rows_kernel<<<elementwise_blocks(rows * cols), 256, 0, stream>>>(y, b, rows, cols);
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
