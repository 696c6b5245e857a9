// The CUDA kernels of ops/mse_loss.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/mse_loss.h"

// The CUDA kernel (backend/cuda/mse_loss.cu), enqueued on `stream`: pred, target, dpred fp32; the loss is
// summed in float64 in a fixed order (block partials, then one block) into *loss on the device, through
// scratch [mse_loss_scratch(n)] doubles.
namespace ms::cuda {

int64_t mse_loss_scratch(int64_t n);
void mse_loss(const MseLossParams<float>& p, double* loss, double* scratch, Stream stream);

}  // namespace ms::cuda
