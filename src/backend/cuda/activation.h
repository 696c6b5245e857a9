// The CUDA kernels of ops/activation.h.
#pragma once
#include <cstdint>

#include "ops/activation.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/activation.cu) on bf16 tensors, computed in fp32, enqueued on `stream`.
namespace ms::cuda {

void gelu_tanh_forward(const uint16_t* x, uint16_t* y, int64_t n, CUstream_st* stream);
void gelu_tanh_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, CUstream_st* stream);
// y = gelu_tanh(gate) * up, elementwise (the gated FFN of the text encoder, forward only).
void gelu_tanh_gate_forward(const uint16_t* gate, const uint16_t* up, uint16_t* y, int64_t n, CUstream_st* stream);
void silu_forward(const uint16_t* x, uint16_t* y, int64_t n, CUstream_st* stream);
void silu_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, CUstream_st* stream);
// SiLU on fp32 tensors (the time path).
void silu_forward(const float* x, float* y, int64_t n, CUstream_st* stream);
void silu_backward(const float* x, const float* dy, float* dx, int64_t n, CUstream_st* stream);

}  // namespace ms::cuda
