// The CUDA kernels of ops/rmsnorm.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/rmsnorm.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/rmsnorm.cu), enqueued on `stream`: x, w, y, dy, dx bf16; rstd and dw fp32
// (the statistics and the weight gradients stay in fp32). dw is summed in a fixed order through scratch
// [rmsnorm_backward_scratch(N, C)] fp32, so it is deterministic.
namespace ms::cuda {

void rmsnorm_forward(const RmsNormParams<uint16_t, float>& p, Stream stream);
// The same on an fp32 x (a residual stream kept in fp32: the text encoder's), to bf16 or fp32 y.
void rmsnorm_forward(const RmsNormParams<float, float, uint16_t, uint16_t>& p, Stream stream);
void rmsnorm_forward(const RmsNormParams<float, float, uint16_t, float>& p, Stream stream);
void rmsnorm_backward(const RmsNormParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
