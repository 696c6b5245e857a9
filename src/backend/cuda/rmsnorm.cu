#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/rmsnorm.h"

namespace ms::cuda {
namespace {

// One block per row n: x [N, C] -> y [N, C], rstd [N]. X, Y: uint16_t (bf16) or float.
template <class X, class Y>
__global__ void rmsnorm_forward_kernel(const X* x, const uint16_t* w, Y* y, float* rstd, int64_t C, float eps) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const X* xr = x + n * C;  // [C]
  float s = 0;
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) s += load(xr, c) * load(xr, c);
  const float rs = rsqrtf(block_sum(s, smem) / float(C) + eps);
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) store(y + n * C, c, load(xr, c) * rs * load(w, c));
  if (threadIdx.x == 0) rstd[n] = rs;
}

// dx = rstd (g - xhat mean(g xhat)), g = dy w, xhat = x rstd; one block per row.
__global__ void rmsnorm_backward_kernel(const uint16_t* x, const uint16_t* w, const float* rstd, const uint16_t* dy,
                                        uint16_t* dx, int64_t C) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const uint16_t *xr = x + n * C, *dyr = dy + n * C;  // [C]
  const float rs = rstd[n];
  float s = 0;
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) s += load(dyr, c) * load(w, c) * load(xr, c) * rs;
  const float mean_gx = block_sum(s, smem) / float(C);
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
    const float xh = load(xr, c) * rs;
    store(dx + n * C, c, load(dx + n * C, c) + rs * (load(dyr, c) * load(w, c) - xh * mean_gx));
  }
}

template <class X, class Y>
void forward(const X* x, const uint16_t* w, Y* y, float* rstd, int64_t N, int64_t C, double eps, Stream stream) {
  if (N == 0) return;
  rmsnorm_forward_kernel<<<unsigned(N), kRowThreads, 0, stream>>>(x, w, y, rstd, C, float(eps));
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void rmsnorm_forward(const RmsNormParams<uint16_t, float>& p, Stream stream) {
  forward(p.x, p.w, p.y, p.rstd, p.N, p.C, p.eps, stream);
}
void rmsnorm_forward(const RmsNormParams<float, float, uint16_t, uint16_t>& p, Stream stream) {
  forward(p.x, p.w, p.y, p.rstd, p.N, p.C, p.eps, stream);
}
void rmsnorm_forward(const RmsNormParams<float, float, uint16_t, float>& p, Stream stream) {
  forward(p.x, p.w, p.y, p.rstd, p.N, p.C, p.eps, stream);
}

void rmsnorm_backward(const RmsNormParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *w = p.w, *dy = p.dy;
  const float* rstd = p.rstd;
  uint16_t* dx = p.dx;
  float* dw = p.dw;
  const int64_t N = p.N, C = p.C;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(rmsnorm_backward_scratch(N, C));
  if (N == 0) return;
  rmsnorm_backward_kernel<<<unsigned(N), kRowThreads, 0, stream>>>(x, w, rstd, dy, dx, C);
  MS_CUDA_CHECK_LAUNCH();
  // dw [C] += sum_n dy xhat
  column_sum([=] __device__(int64_t n, int64_t c) { return load(dy, n * C + c) * load(x, n * C + c) * rstd[n]; }, dw,
             scratch, N, C, stream);
}

}  // namespace ms::cuda
