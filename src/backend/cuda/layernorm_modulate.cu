#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/layernorm_modulate.h"

namespace ms::cuda {
namespace {

// One block per row n = b * L + l.
__global__ void forward_kernel(const uint16_t* x, const float* shift, const float* scale, uint16_t* y, float* mean,
                               float* rstd, int64_t L, int64_t C, int64_t stride, float eps) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x, b = n / L;
  const uint16_t* xr = x + n * C;  // [C]
  float mu, rs;
  row_moments(xr, C, eps, smem, &mu, &rs);
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads)
    store(y + n * C, c, (load(xr, c) - mu) * rs * (1.f + scale[b * stride + c]) + shift[b * stride + c]);
  if (threadIdx.x == 0) mean[n] = mu, rstd[n] = rs;
}

// The LayerNorm backward with g = dy (1 + scale); one block per row.
__global__ void backward_kernel(const uint16_t* x, const float* mean, const float* rstd, const float* scale,
                                const uint16_t* dy, uint16_t* dx, int64_t L, int64_t C, int64_t stride) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t n = blockIdx.x, b = n / L;
  const uint16_t* dyr = dy + n * C;  // [C]
  const float* sc = scale + b * stride;
  layernorm_row_backward(
      x + n * C, mean[n], rstd[n], [=](int64_t c) { return load(dyr, c) * (1.f + sc[c]); }, dx + n * C, C, smem);
}

}  // namespace

void layernorm_modulate_forward(const NormModulateParams<uint16_t, float>& p, Stream stream) {
  const uint16_t* x = p.x;
  const float *shift = p.shift, *scale = p.scale;
  uint16_t* y = p.y;
  float *mean = p.mean, *rstd = p.rstd;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  const double eps = p.eps;
  if (B * L == 0) return;
  forward_kernel<<<unsigned(B * L), kRowThreads, 0, stream>>>(x, shift, scale, y, mean, rstd, L, C, stride, float(eps));
  MS_CUDA_CHECK_LAUNCH();
}

void layernorm_modulate_backward(const NormModulateParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *dy = p.dy;
  const float *mean = p.mean, *rstd = p.rstd, *scale = p.scale;
  uint16_t* dx = p.dx;
  float *dshift = p.dshift, *dscale = p.dscale;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(layernorm_modulate_backward_scratch(L, C));
  if (B * L == 0) return;
  backward_kernel<<<unsigned(B * L), kRowThreads, 0, stream>>>(x, mean, rstd, scale, dy, dx, L, C, stride);
  MS_CUDA_CHECK_LAUNCH();
  for (int64_t b = 0; b < B; ++b) {  // per sample: dshift [C] += sum_l dy, dscale [C] += sum_l dy xhat
    const uint16_t *xb = x + b * L * C, *dyb = dy + b * L * C;  // [L, C]
    const float *mb = mean + b * L, *rb = rstd + b * L;         // [L]
    column_sum([=] __device__(int64_t l, int64_t c) { return load(dyb, l * C + c); }, dshift + b * stride, scratch, L,
               C, stream);
    column_sum(
        [=] __device__(int64_t l, int64_t c) { return load(dyb, l * C + c) * (load(xb, l * C + c) - mb[l]) * rb[l]; },
        dscale + b * stride, scratch, L, C, stream);
  }
}

}  // namespace ms::cuda
