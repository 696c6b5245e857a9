#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/t5_attention.h"

namespace ms::cuda {
namespace {

// One block per row (head h, query i) of s.
__global__ void t5_bias_softmax_kernel(const float* s, const int32_t* bucket, const float* table, uint16_t* p,
                                       int64_t H, int64_t L) {
  __shared__ float smem[kRowThreads / 32];
  const int64_t row = blockIdx.x, h = row / L, i = row % L;
  const float* sr = s + row * L;             // [L] keys
  const int32_t* br = bucket + (L - 1 - i);  // br[j]: the bucket of offset j - i
  block_softmax_row(
      L, [&](int64_t j) { return sr[j] + table[int64_t(br[j]) * H + h]; },
      [&](int64_t j, float v) { store(p + row * L, j, v); }, smem);
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
