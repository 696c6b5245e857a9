#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mse_loss.h"

namespace ms::cuda {
namespace {

constexpr int kLossBlocks = 256;  // partial sums: a fixed count, so the summation order never changes

// Block k sums (pred - target)^2 over its grid-stride share into partial[k] (float64) and writes dpred.
__global__ void mse_partials(const float* pred, const float* target, float* dpred, double* partial, int64_t n,
                             double grad_scale) {
  __shared__ double smem[kRowThreads];
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const double e = double(pred[i]) - double(target[i]);
    s += e * e;
    if (dpred) dpred[i] = float(grad_scale * e);
  }
  smem[threadIdx.x] = s;
  __syncthreads();
  for (int o = kRowThreads / 2; o > 0; o >>= 1) {  // a tree in a fixed order
    if (threadIdx.x < o) smem[threadIdx.x] += smem[threadIdx.x + o];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = smem[0];
}

__global__ void mse_finish(const double* partial, double* loss, int64_t n) {
  double s = 0;
  for (int k = 0; k < kLossBlocks; ++k) s += partial[k];
  *loss = s / double(n);
}

}  // namespace

int64_t mse_loss_scratch(int64_t) { return kLossBlocks; }

void mse_loss(const MseLossParams<float>& p, double* loss, double* scratch, Stream stream) {
  const float *pred = p.pred, *target = p.target;
  float* dpred = p.dpred;
  const int64_t n = p.n;
  const double scale = p.scale;
  MS_CHECK(n > 0, "mse_loss of ", n, " elements");
  mse_partials<<<kLossBlocks, kRowThreads, 0, stream>>>(pred, target, dpred, scratch, n, 2.0 * scale / double(n));
  MS_CUDA_CHECK_LAUNCH();
  mse_finish<<<1, 1, 0, stream>>>(scratch, loss, n);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
