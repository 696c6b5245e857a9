// The CUDA kernels of ops/activation.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/activation.h"

// The CUDA kernels (backend/cuda/activation.cu) on bf16 tensors, computed in fp32, enqueued on `stream`.
namespace ms::cuda {

void gelu_tanh_forward(const ActivationParams<uint16_t>& p, Stream stream);
void gelu_tanh_backward(const ActivationParams<uint16_t>& p, Stream stream);
// y = gelu_tanh(gate) * up, elementwise (the gated FFN of the text encoder, forward only).
void gelu_tanh_gate_forward(const uint16_t* gate, const uint16_t* up, uint16_t* y, int64_t n, Stream stream);
void silu_forward(const ActivationParams<uint16_t>& p, Stream stream);
void silu_backward(const ActivationParams<uint16_t>& p, Stream stream);
// SiLU on fp32 tensors (the time path).
void silu_forward(const ActivationParams<float>& p, Stream stream);
void silu_backward(const ActivationParams<float>& p, Stream stream);

}  // namespace ms::cuda
