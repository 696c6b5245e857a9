// The CUDA kernels of ops/embedding.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/embedding.h"

// The CUDA kernels (backend/cuda/embedding.cu), enqueued on `stream`: the timestep embedding in fp32
// (computed in float64), the context padded from fp32 into bf16 (and its gradient back to fp32).
namespace ms::cuda {

void sinusoidal_embedding(const SinusoidalParams<float>& p, Stream stream);
void pad_context_forward(const PadContextParams<float, uint16_t>& p, Stream stream);
void pad_context_backward(const PadContextParams<float, uint16_t>& p, Stream stream);

}  // namespace ms::cuda
