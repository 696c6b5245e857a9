#include <cfloat>

#include "backend/cuda/attention.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

constexpr int kThreads = 128;     // threads per row block; also the rows of one chunk of scores
constexpr int kMaxHeadDim = 256;  // two channels per thread at most
constexpr int kChannels = kMaxHeadDim / kThreads;

// Row r of a [B, L, nh, d] tensor for sample b, token i, head h.
__device__ inline int64_t row(int64_t b, int64_t i, int64_t h, int64_t L, int64_t nh, int64_t d) {
  return ((b * L + i) * nh + h) * d;
}

__device__ inline float dot_bf16(const float* a, const uint16_t* b, int64_t d) {
  float s = 0;
  for (int64_t c = 0; c < d; ++c) s += a[c] * load(b, c);
  return s;
}

// The block's max and sum (kernel_util.cuh), each followed by the barrier that frees smem for the next.
__device__ inline float block_max(float v, float* smem) {
  const float m = block_reduce<kThreads>(
      v, smem, [](float a, float b) { return fmaxf(a, b); }, -FLT_MAX);
  __syncthreads();
  return m;
}

__device__ inline float block_total(float v, float* smem) {
  const float s = block_sum<kThreads>(v, smem);
  __syncthreads();
  return s;
}

// acc[t] += sum over jj < n of w[jj] * m[row j0 + jj, channel threadIdx.x + t kThreads], for the rows of
// sample b, head h of a [B, L, nh, d] tensor: one chunk of a weighted sum of rows, a channel per thread.
__device__ inline void accumulate_rows(float (&acc)[kChannels], const float* w, const uint16_t* m, int64_t b,
                                       int64_t j0, int64_t n, int64_t h, int64_t L, int64_t nh, int64_t d) {
  for (int t = 0; t < kChannels; ++t) {
    const int64_t c = threadIdx.x + t * kThreads;
    if (c < d)
      for (int64_t jj = 0; jj < n; ++jj) acc[t] += w[jj] * load(m + row(b, j0 + jj, h, L, nh, d), c);
  }
}

// Block (b, h, i): out[i] = sum_j p_ij v_j, lse[i]; the max, the sum and the output are three passes.
__global__ void forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                               AttentionDims a, float scale) {
  __shared__ float qs[kMaxHeadDim], p[kThreads], red[kThreads / 32];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = a.d;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) qs[c] = load(q + row(b, i, h, a.Lq, a.nh, d), c) * scale;
  __syncthreads();
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < a.Lk; j += kThreads) m = fmaxf(m, dot_bf16(qs, k + row(b, j, h, a.Lk, a.nh, d), d));
  m = block_max(m, red);
  float l = 0;
  for (int64_t j = threadIdx.x; j < a.Lk; j += kThreads)
    l += __expf(dot_bf16(qs, k + row(b, j, h, a.Lk, a.nh, d), d) - m);
  l = block_total(l, red);
  float acc[kChannels] = {};
  for (int64_t j0 = 0; j0 < a.Lk; j0 += kThreads) {
    const int64_t j = j0 + threadIdx.x;
    p[threadIdx.x] = j < a.Lk ? __expf(dot_bf16(qs, k + row(b, j, h, a.Lk, a.nh, d), d) - m) / l : 0.f;
    __syncthreads();
    accumulate_rows(acc, p, v, b, j0, min(int64_t(kThreads), a.Lk - j0), h, a.Lk, a.nh, d);
    __syncthreads();
  }
  for (int t = 0; t < kChannels; ++t) {
    const int64_t c = threadIdx.x + t * kThreads;
    if (c < d) store(out + row(b, i, h, a.Lq, a.nh, d), c, acc[t]);
  }
  if (threadIdx.x == 0) lse[(b * a.nh + h) * a.Lq + i] = m + logf(l);
}

// delta[b, h, i] = dout_i . out_i (the softmax backward's row term).
__global__ void delta_kernel(const uint16_t* out, const uint16_t* dout, float* delta, AttentionDims a) {
  __shared__ float red[kThreads / 32];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, r = row(b, i, h, a.Lq, a.nh, a.d);
  float s = 0;
  for (int64_t c = threadIdx.x; c < a.d; c += kThreads) s += load(out + r, c) * load(dout + r, c);
  s = block_total(s, red);
  if (threadIdx.x == 0) delta[(b * a.nh + h) * a.Lq + i] = s;
}

// Block (b, h, i): dq_i += scale sum_j p_ij (dout_i . v_j - delta_i) k_j.
__global__ void dq_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                          const uint16_t* dout, const float* delta, uint16_t* dq, AttentionDims a, float scale) {
  __shared__ float qs[kMaxHeadDim], gs[kMaxHeadDim], ds[kThreads];
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = a.d, r = row(b, i, h, a.Lq, a.nh, d);
  for (int64_t c = threadIdx.x; c < d; c += kThreads) qs[c] = load(q + r, c) * scale, gs[c] = load(dout + r, c);
  __syncthreads();
  const float li = lse[(b * a.nh + h) * a.Lq + i], di = delta[(b * a.nh + h) * a.Lq + i];
  float acc[kChannels] = {};
  for (int64_t j0 = 0; j0 < a.Lk; j0 += kThreads) {
    const int64_t j = j0 + threadIdx.x;
    float g = 0;
    if (j < a.Lk) {
      const int64_t rk = row(b, j, h, a.Lk, a.nh, d);
      g = __expf(dot_bf16(qs, k + rk, d) - li) * (dot_bf16(gs, v + rk, d) - di);
    }
    ds[threadIdx.x] = g;
    __syncthreads();
    accumulate_rows(acc, ds, k, b, j0, min(int64_t(kThreads), a.Lk - j0), h, a.Lk, a.nh, d);
    __syncthreads();
  }
  for (int t = 0; t < kChannels; ++t) {
    const int64_t c = threadIdx.x + t * kThreads;
    if (c < d) store(dq + r, c, load(dq + r, c) + scale * acc[t]);
  }
}

// Block (b, h, j): dk_j += scale sum_i p_ij (dout_i . v_j - delta_i) q_i, dv_j += sum_i p_ij dout_i.
__global__ void dkv_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                           const uint16_t* dout, const float* delta, uint16_t* dk, uint16_t* dv, AttentionDims a,
                           float scale) {
  __shared__ float ks[kMaxHeadDim], vs[kMaxHeadDim], ps[kThreads], ds[kThreads];
  const int64_t j = blockIdx.x, h = blockIdx.y, b = blockIdx.z, d = a.d, rk = row(b, j, h, a.Lk, a.nh, d);
  for (int64_t c = threadIdx.x; c < d; c += kThreads) ks[c] = load(k + rk, c) * scale, vs[c] = load(v + rk, c);
  __syncthreads();
  float gk[kChannels] = {}, gv[kChannels] = {};
  for (int64_t i0 = 0; i0 < a.Lq; i0 += kThreads) {
    const int64_t i = i0 + threadIdx.x;
    float p = 0, g = 0;
    if (i < a.Lq) {
      const int64_t r = row(b, i, h, a.Lq, a.nh, d), s = (b * a.nh + h) * a.Lq + i;
      p = __expf(dot_bf16(ks, q + r, d) - lse[s]);
      g = p * (dot_bf16(vs, dout + r, d) - delta[s]);
    }
    ps[threadIdx.x] = p, ds[threadIdx.x] = g;
    __syncthreads();
    const int64_t n = min(int64_t(kThreads), a.Lq - i0);
    accumulate_rows(gk, ds, q, b, i0, n, h, a.Lq, a.nh, d);
    accumulate_rows(gv, ps, dout, b, i0, n, h, a.Lq, a.nh, d);
    __syncthreads();
  }
  for (int t = 0; t < kChannels; ++t) {
    const int64_t c = threadIdx.x + t * kThreads;
    if (c < d) {
      store(dk + rk, c, load(dk + rk, c) + scale * gk[t]);
      store(dv + rk, c, load(dv + rk, c) + gv[t]);
    }
  }
}

void check_dims(const AttentionDims& a) {
  MS_CHECK(a.d > 0 && a.d <= kMaxHeadDim, "cuda attention: head dim ", a.d, " must be in 1..", kMaxHeadDim);
  MS_CHECK(a.Lq > 0 && a.Lk > 0 && a.nh > 0 && a.B > 0, "cuda attention: empty dims");
  MS_CHECK(a.nh <= 65535 && a.B <= 65535, "cuda attention: at most 65535 heads and samples");
}

}  // namespace

void attention_forward(const AttentionParams<uint16_t, float>& p, const Launch& l) {
  const AttentionDims& a = p.dims;
  check_dims(a);
  if (a.d <= kFlashMaxHeadDim) return flash_attention_forward(p.t, dense_rows(a), l.stream);
  forward_kernel<<<dim3(unsigned(a.Lq), unsigned(a.nh), unsigned(a.B)), kThreads, 0, l.stream>>>(
      p.t.q, p.t.k, p.t.v, p.t.out, p.t.lse, a, 1.f / sqrtf(float(a.d)));
  MS_CUDA_CHECK_LAUNCH();
}

void attention_delta(const uint16_t* out, const uint16_t* dout, float* delta, const AttentionDims& a, Stream stream) {
  delta_kernel<<<dim3(unsigned(a.Lq), unsigned(a.nh), unsigned(a.B)), kThreads, 0, stream>>>(out, dout, delta, a);
  MS_CUDA_CHECK_LAUNCH();
}

void attention_backward(const AttentionParams<uint16_t, float>& p, const Launch& l) {
  const AttentionDims& a = p.dims;
  check_dims(a);
  const float scale = 1.f / sqrtf(float(a.d));
  const dim3 queries(unsigned(a.Lq), unsigned(a.nh), unsigned(a.B)),
      keys(unsigned(a.Lk), unsigned(a.nh), unsigned(a.B));
  float* delta = l.scratch_for(attention_backward_scratch(a));
  const Stream stream = l.stream;
  attention_delta(p.t.out, p.t.dout, delta, a, stream);
  if (a.d <= kFlashMaxHeadDim) return flash_attention_backward(p.t, delta, dense_rows(a), stream);
  const float* lse = p.t.lse;
  dq_kernel<<<queries, kThreads, 0, stream>>>(p.t.q, p.t.k, p.t.v, lse, p.t.dout, delta, p.t.dq, a, scale);
  MS_CUDA_CHECK_LAUNCH();
  dkv_kernel<<<keys, kThreads, 0, stream>>>(p.t.q, p.t.k, p.t.v, lse, p.t.dout, delta, p.t.dk, p.t.dv, a, scale);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
