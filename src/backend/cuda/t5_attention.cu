#include <cfloat>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/t5_attention.h"

namespace ms::cuda {
namespace {

// One block per row (head h, query i) of s; the logits are recomputed in each of the three passes (a row is at most
// text_len = 512 floats, read from L2).
__global__ void t5_bias_softmax_kernel(const float* s, const int32_t* bucket, const float* table, uint16_t* p,
                                       int64_t H, int64_t L) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t row = blockIdx.x, h = row / L, i = row % L;
  const float* sr = s + row * L;             // [L] keys
  const int32_t* br = bucket + (L - 1 - i);  // br[j]: the bucket of offset j - i
  const auto logit = [&](int64_t j) { return sr[j] + table[int64_t(br[j]) * H + h]; };
  float m = -FLT_MAX;
  for (int64_t j = threadIdx.x; j < L; j += kRowThreads) m = fmaxf(m, logit(j));
  m = block_reduce<kRowThreads>(
      m, smem, [](float a, float b) { return fmaxf(a, b); }, -FLT_MAX);
  __syncthreads();
  float z = 0;
  for (int64_t j = threadIdx.x; j < L; j += kRowThreads) z += __expf(logit(j) - m);
  const float inv = 1.f / block_sum(z, smem);
  for (int64_t j = threadIdx.x; j < L; j += kRowThreads) store(p + row * L, j, __expf(logit(j) - m) * inv);
}

}  // namespace

void t5_bias_softmax(const float* s, const int32_t* bucket, const float* table, uint16_t* p, int64_t H, int64_t L,
                     Stream stream) {
  if (H * L == 0) return;
  MS_CHECK(H * L <= 0x7fffffff, "t5_bias_softmax: ", H, " heads x ", L, " rows is over the grid's limit");
  t5_bias_softmax_kernel<<<unsigned(H * L), kRowThreads, 0, stream>>>(s, bucket, table, p, H, L);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
