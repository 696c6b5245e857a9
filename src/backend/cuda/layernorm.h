// The CUDA kernels of ops/layernorm.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/layernorm.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/layernorm.cu), enqueued on the stream: x, w, b, y, dy, dx bf16; mean, rstd,
// dw and db fp32. dw, db are summed in a fixed order through the launch's scratch
// [layernorm_backward_scratch(N, C)].
namespace ms::cuda {

void layernorm_forward(const LayerNormParams<uint16_t, float>& p, Stream stream);
void layernorm_backward(const LayerNormParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
