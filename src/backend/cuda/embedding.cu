#include "backend/cuda/embedding.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

// out [B, dim]: cos then sin of t * 10000^(-i/half), in float64.
__global__ void sinusoidal_kernel(const float* t, float* out, int64_t B, int64_t dim) {
  const int64_t half = dim / 2;
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < B * half; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = k / half, i = k % half;
    double s, c;
    sincos(double(t[b]) * pow(10000.0, -double(i) / double(half)), &s, &c);
    out[b * dim + i] = float(c);
    out[b * dim + half + i] = float(s);
  }
}

// padded [B, Lt, C] from context [B, Lc, C], rows Lc.. zero.
__global__ void pad_kernel(const float* context, uint16_t* padded, int64_t B, int64_t Lc, int64_t Lt, int64_t C) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < B * Lt * C;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = k % C, l = (k / C) % Lt, b = k / (Lt * C);
    store(padded, k, l < Lc ? context[(b * Lc + l) * C + c] : 0.f);
  }
}

// dcontext [B, Lc, C] = the first Lc rows of dpadded [B, Lt, C].
__global__ void unpad_kernel(const uint16_t* dpadded, float* dcontext, int64_t B, int64_t Lc, int64_t Lt, int64_t C) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < B * Lc * C;
       k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = k % C, l = (k / C) % Lc, b = k / (Lc * C);
    dcontext[k] = load(dpadded, (b * Lt + l) * C + c);
  }
}

}  // namespace

void sinusoidal_embedding(const SinusoidalParams<float>& p, Stream stream) {
  const float* t = p.t;
  float* out = p.out;
  const int64_t B = p.B, dim = p.dim;
  sinusoidal_kernel<<<elementwise_blocks(B * dim / 2), 256, 0, stream>>>(t, out, B, dim);
  MS_CUDA_CHECK_LAUNCH();
}

void pad_context_forward(const PadContextParams<float, uint16_t>& p, Stream stream) {
  const float* context = p.context;
  uint16_t* padded = p.padded;
  const int64_t B = p.B, Lc = p.Lc, Lt = p.Lt, C = p.C;
  MS_CHECK(Lc <= Lt, "pad_context: ", Lc, " context tokens exceed text_len ", Lt);
  pad_kernel<<<elementwise_blocks(B * Lt * C), 256, 0, stream>>>(context, padded, B, Lc, Lt, C);
  MS_CUDA_CHECK_LAUNCH();
}

void pad_context_backward(const PadContextParams<float, uint16_t>& p, Stream stream) {
  const uint16_t* dpadded = p.dpadded;
  float* dcontext = p.dcontext;
  const int64_t B = p.B, Lc = p.Lc, Lt = p.Lt, C = p.C;
  unpad_kernel<<<elementwise_blocks(B * Lc * C), 256, 0, stream>>>(dpadded, dcontext, B, Lc, Lt, C);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
