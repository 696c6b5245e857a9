// Mean squared error: loss = mean((pred - target)^2), computed in float64.
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cpu {

// Returns the loss; writes dpred [n] = 2 (pred - target) / n * scale when dpred is non-null.
template <class T>
double mse_loss(const T* pred, const T* target, T* dpred, int64_t n, double scale = 1.0);

}  // namespace ms::cpu

// The CUDA kernel (backend/cuda/mse_loss.cu), enqueued on `stream`: pred, target, dpred fp32; the loss is
// summed in float64 in a fixed order (block partials, then one block) into *loss on the device, through
// scratch [mse_loss_scratch(n)] doubles.
namespace ms::cuda {

int64_t mse_loss_scratch(int64_t n);
void mse_loss(const float* pred, const float* target, float* dpred, double* loss, double* scratch, int64_t n,
              double scale, CUstream_st* stream);

}  // namespace ms::cuda
