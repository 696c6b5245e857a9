#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mse_loss.h"

namespace ms::cuda {
namespace {

constexpr int kLossBlocks = 256;  // partial sums: a fixed count, so the summation order never changes

// Block k sums (pred - target)^2 over its grid-stride share into partial[k] (float64) and writes dpred.
__global__ void mse_partials(MseLossParams<float> p, double* partial, double grad_scale) {
  __shared__ double smem[kRowThreads];
  const float *pred = p.pred, *target = p.target;
  float* dpred = p.dpred;
  double s = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * blockDim.x) {
    const bool out = p.skip > 0 && i % p.period < p.skip;  // MseLossParams::left_out, inlined for the device
    const double e = out ? 0.0 : double(pred[i]) - double(target[i]);
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
  MS_CHECK(p.n > 0, "mse_loss of ", p.n, " elements");
  MS_CHECK(p.skip == 0 || (p.period > p.skip && p.n % p.period == 0), "mse_loss: skip ", p.skip, " of ", p.period,
           " of ", p.n);
  mse_partials<<<kLossBlocks, kRowThreads, 0, stream>>>(p, scratch, 2.0 * p.scale / double(p.kept()));
  MS_CUDA_CHECK_LAUNCH();
  mse_finish<<<1, 1, 0, stream>>>(scratch, loss, p.kept());
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
