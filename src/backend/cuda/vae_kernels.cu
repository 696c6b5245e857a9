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

__global__ void avg_down_kernel(VaeAvgDownParams p, int64_t g, int64_t n) {
  const int64_t s = p.s, ho = p.h / s, wo = p.w / s;
  const float inv = 1.0f / float(g);
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = e / (ho * wo), i = e / wo % ho, j = e % wo;
    float acc = 0.f;
    for (int64_t k = o * g; k < (o + 1) * g; ++k) {  // the digits (c, a, b, d) of k
      const int64_t c = k / (p.ft * s * s), a = k / (s * s) % p.ft, b = k / s % s, d = k % s;
      const float* x = p.x[a];
      if (x) acc += x[(c * p.h + i * s + b) * p.w + j * s + d];
    }
    p.y[e] += inv * acc;
  }
}

__global__ void dup_up_kernel(VaeDupUpParams p, int64_t r, int64_t n) {
  const int64_t s = p.s, ho = p.h * s, wo = p.w * s;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = e / (ho * wo), i = e / wo % ho, j = e % wo;
    const int64_t src = (((o * p.ft + p.a) * s + i % s) * s + j % s) / r;
    p.y[e] += p.x[(src * p.h + i / s) * p.w + j / s];
  }
}

}  // namespace

void avg_down_add(const VaeAvgDownParams& p, Stream stream) {
  const int64_t n = p.co * (p.h / p.s) * (p.w / p.s);
  if (n == 0) return;
  avg_down_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(p, p.ci * p.ft * p.s * p.s / p.co, n);
  MS_CUDA_CHECK_LAUNCH();
}

void dup_up_add(const VaeDupUpParams& p, Stream stream) {
  const int64_t n = p.co * p.h * p.s * p.w * p.s;
  if (n == 0) return;
  dup_up_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(p, p.co * p.ft * p.s * p.s / p.ci, n);
  MS_CUDA_CHECK_LAUNCH();
}

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
