// Helpers shared by the CUDA kernels: bf16 loads and stores, block sums, and the deterministic column
// reduction that the norms' weight gradients use.
#pragma once
#include <cuda_bf16.h>

#include <cfloat>
#include <cstdint>

#include "backend/cuda/check.h"
#include "backend/cuda/device.h"
#include "runtime/reduction_scratch.h"

namespace ms::cuda {

constexpr int kRowThreads = 256;  // threads per row in the row-wise kernels (norms)

__device__ inline float load(const uint16_t* p, int64_t i) {
  return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
}
__device__ inline void store(uint16_t* p, int64_t i, float v) {
  reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16(v);
}
// The same for fp32 tensors, so that a kernel templated on its element type serves both.
__device__ inline float load(const float* p, int64_t i) { return p[i]; }
__device__ inline void store(float* p, int64_t i, float v) { p[i] = v; }

// op-reduction of v over a block of Threads threads, returned to every thread (the warps' results combined in
// the same order by every thread: deterministic). Needs Threads / 32 floats of shared memory at `smem`, and a
// __syncthreads() before smem is reused.
template <int Threads, class Op>
__device__ float block_reduce(float v, float* smem, Op op, float init) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (threadIdx.x % 32 == 0) smem[threadIdx.x / 32] = v;
  __syncthreads();
  float r = init;
  for (int w = 0; w < Threads / 32; ++w) r = op(r, smem[w]);
  return r;
}

template <int Threads = kRowThreads>
__device__ float block_sum(float v, float* smem) {
  return block_reduce<Threads>(
      v, smem, [](float a, float b) { return a + b; }, 0.f);
}

// One block's softmax over a row of n logits logit(j), each probability handed to store(j, p): the max, the sum of
// exp(logit - max), then the row; the logits are recomputed in each pass. Deterministic (block_reduce's fixed order).
template <class Logit, class Store>
__device__ void block_softmax_row(int64_t n, Logit logit, Store store, float* smem) {
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) m = fmaxf(m, logit(j));
  m = block_reduce<kRowThreads>(
      m, smem, [](float a, float b) { return fmaxf(a, b); }, -FLT_MAX);
  __syncthreads();
  float z = 0.f;
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) z += __expf(logit(j) - m);
  const float inv = 1.f / block_sum(z, smem);
  for (int64_t j = threadIdx.x; j < n; j += kRowThreads) store(j, __expf(logit(j) - m) * inv);
}

// One block's row xr [C]: its mean and 1 / sqrt(biased variance + eps), the variance taken around the mean in a
// second pass (no cancellation). Every thread gets both.
__device__ inline void row_moments(const uint16_t* xr, int64_t C, float eps, float* smem, float* mu, float* rs) {
  float s = 0;
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) s += load(xr, c);
  *mu = block_sum(s, smem) / float(C);
  __syncthreads();
  float v = 0;
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) v += (load(xr, c) - *mu) * (load(xr, c) - *mu);
  *rs = rsqrtf(block_sum(v, smem) / float(C) + eps);
}

// The LayerNorm backward of one block's row xr [C] for upstream gradients g(c):
// dxr[c] += rstd (g - mean(g) - xhat mean(g xhat)), xhat = (x - mu) rstd.
template <class G>
__device__ void layernorm_row_backward(const uint16_t* xr, float mu, float rs, G g, uint16_t* dxr, int64_t C,
                                       float* smem) {
  float sg = 0, sgx = 0;
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads) {
    sg += g(c);
    sgx += g(c) * (load(xr, c) - mu) * rs;
  }
  const float mean_g = block_sum(sg, smem) / float(C);
  __syncthreads();
  const float mean_gx = block_sum(sgx, smem) / float(C);
  for (int64_t c = threadIdx.x; c < C; c += kRowThreads)
    store(dxr, c, load(dxr, c) + rs * (g(c) - mean_g - (load(xr, c) - mu) * rs * mean_gx));
}

// Column sums in a fixed order: partial[chunk, c] = sum over the chunk's rows of f(n, c), then
// out[c] += sum over chunks. scratch holds column_scratch(N, C) floats (runtime/reduction_scratch.h).

template <class F>
__global__ void column_partials(F f, float* partial, int64_t N, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= C) return;
  const int64_t n0 = chunk * kColumnRows, n1 = min(N, n0 + kColumnRows);
  float s = 0;
  for (int64_t n = n0; n < n1; ++n) s += f(n, c);
  partial[chunk * C + c] = s;
}

// A template (T = float) rather than an inline __global__: a kernel defined in a header must be one that every
// translation unit may instantiate.
template <class T>
__global__ void column_finish(const T* partial, T* out, int64_t chunks, int64_t C) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  T s = 0;
  for (int64_t k = 0; k < chunks; ++k) s += partial[k * C + c];
  out[c] += s;
}

template <class F>
void column_sum(F f, float* out, float* scratch, int64_t N, int64_t C, Stream stream) {
  if (N == 0 || C == 0) return;
  const int64_t chunks = (N + kColumnRows - 1) / kColumnRows;
  MS_CHECK(chunks <= 65535, "column sum over ", N, " rows: at most ", 65535 * kColumnRows);
  const unsigned blocks = unsigned((C + 255) / 256);
  column_partials<<<dim3(blocks, unsigned(chunks)), 256, 0, stream>>>(f, scratch, N, C);
  MS_CUDA_CHECK_LAUNCH();
  column_finish<float><<<blocks, 256, 0, stream>>>(scratch, out, chunks, C);
  MS_CUDA_CHECK_LAUNCH();
}

// Grid size for an elementwise kernel over n elements (grid-stride loops cover the rest).
inline unsigned elementwise_blocks(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return unsigned(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

}  // namespace ms::cuda
