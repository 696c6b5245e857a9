#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/layernorm.h"

namespace ms::cuda {
namespace {

// One block per row n: x [N, C] -> y [N, C], mean [N], rstd [N]; w, b [C] both null or both set.
__global__ void layernorm_forward_kernel(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y,
                                         float* mean, float* rstd, int64_t C, float eps) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const uint16_t* xr = x + n * C;  // [C]
  float mu, rs;
  row_moments(xr, C, eps, smem, &mu, &rs);
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
    const float xh = (load(xr, c) - mu) * rs;
    store(y + n * C, c, w ? xh * load(w, c) + load(b, c) : xh);
  }
  if (threadIdx.x == 0) mean[n] = mu, rstd[n] = rs;
}

// The LayerNorm backward with g = dy [* w]; one block per row.
__global__ void layernorm_backward_kernel(const uint16_t* x, const uint16_t* w, const float* mean, const float* rstd,
                                          const uint16_t* dy, uint16_t* dx, int64_t C) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const uint16_t* dyr = dy + n * C;  // [C]
  layernorm_row_backward(
      x + n * C, mean[n], rstd[n], [=](int64_t c) { return w ? load(dyr, c) * load(w, c) : load(dyr, c); }, dx + n * C,
      C, smem);
}

}  // namespace

void layernorm_forward(const LayerNormParams<uint16_t, float>& p, Stream stream) {
  const uint16_t *x = p.x, *w = p.w, *b = p.b;
  uint16_t* y = p.y;
  float *mean = p.mean, *rstd = p.rstd;
  const int64_t N = p.N, C = p.C;
  const double eps = p.eps;
  MS_CHECK((w == nullptr) == (b == nullptr), "layernorm: w and b must both be set or both be null");
  if (N == 0) return;
  layernorm_forward_kernel<<<unsigned(N), kRowThreads, 0, stream>>>(x, w, b, y, mean, rstd, C, float(eps));
  MS_CUDA_CHECK_LAUNCH();
}

void layernorm_backward(const LayerNormParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *w = p.w, *dy = p.dy;
  const float *mean = p.mean, *rstd = p.rstd;
  uint16_t* dx = p.dx;
  float *dw = p.dw, *db = p.db;
  const int64_t N = p.N, C = p.C;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(layernorm_backward_scratch(N, C));
  if (N == 0) return;
  layernorm_backward_kernel<<<unsigned(N), kRowThreads, 0, stream>>>(x, w, mean, rstd, dy, dx, C);
  MS_CUDA_CHECK_LAUNCH();
  if (!w) return;
  // dw [C] += sum_n dy xhat; db [C] += sum_n dy (the scratch is reused: the stream orders the two sums)
  column_sum(
      [=] __device__(int64_t n, int64_t c) { return load(dy, n * C + c) * (load(x, n * C + c) - mean[n]) * rstd[n]; },
      dw, scratch, N, C, stream);
  column_sum([=] __device__(int64_t n, int64_t c) { return load(dy, n * C + c); }, db, scratch, N, C, stream);
}

}  // namespace ms::cuda
