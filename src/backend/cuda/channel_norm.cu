#include <cmath>

#include "backend/cuda/channel_norm.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

// One thread per pixel p: the sum of squares down its channels, then each channel scaled (and gated); neighbouring
// threads read neighbouring pixels of a plane.
__global__ void channel_rms_norm_kernel(const float* x, const float* gamma, float* y, int64_t C, int64_t N, bool silu,
                                        float root_c) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < N; p += int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (int64_t c = 0; c < C; ++c) s += x[c * N + p] * x[c * N + p];
    const float scale = root_c / fmaxf(sqrtf(s), 1e-12f);  // sqrt(C) / max(||x||, 1e-12)
    for (int64_t c = 0; c < C; ++c) {
      const float h = x[c * N + p] * scale * gamma[c];
      y[c * N + p] = silu ? h / (1.f + __expf(-h)) : h;
    }
  }
}

}  // namespace

void channel_rms_norm_forward(const ChannelNormParams<float>& p, Stream stream) {
  const float *x = p.x, *gamma = p.gamma;
  float* y = p.y;
  const int64_t C = p.C, N = p.N;
  const bool silu = p.silu;
  if (N == 0) return;
  channel_rms_norm_kernel<<<elementwise_blocks(N), 256, 0, stream>>>(x, gamma, y, C, N, silu,
                                                                     float(std::sqrt(double(C))));
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
