// The CUDA kernels of ops/window_attention.h.
#pragma once
#include <array>
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/window_attention.h"

// The CUDA version (backend/cuda/window_attention.cu), enqueued on the launch's stream: the flash-style kernels with
// each cell a group of rows (backend/cuda/flash_attention.h); q, k, v, out, dout, dq, dk, dv bf16, lse fp32, head dims
// up to 128. The backward's scratch holds attention_backward_scratch({B, L, L, nh, d}) floats
// (runtime/reduction_scratch.h). Deterministic.
namespace ms::cuda {

void window_attention_forward(const WindowAttentionParams<uint16_t, float>& p, const Launch& l);
void window_attention_backward(const WindowAttentionParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
