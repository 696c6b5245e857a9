// Pointwise activations: GELU (tanh approximation, torch approximate="tanh") and SiLU.
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cpu {

// y[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), n elements.
template <class T>
void gelu_tanh_forward(const T* x, T* y, int64_t n);
// dx[i] += dy[i] * gelu'(x[i]).
template <class T>
void gelu_tanh_backward(const T* x, const T* dy, T* dx, int64_t n);

// y[i] = x / (1 + exp(-x)).
template <class T>
void silu_forward(const T* x, T* y, int64_t n);
// dx[i] += dy[i] * silu'(x[i]).
template <class T>
void silu_backward(const T* x, const T* dy, T* dx, int64_t n);

}  // namespace ms::cpu

// The CUDA kernels (backend/cuda/activation.cu) on bf16 tensors, computed in fp32, enqueued on `stream`.
namespace ms::cuda {

void gelu_tanh_forward(const uint16_t* x, uint16_t* y, int64_t n, CUstream_st* stream);
void gelu_tanh_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, CUstream_st* stream);
void silu_forward(const uint16_t* x, uint16_t* y, int64_t n, CUstream_st* stream);
void silu_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n, CUstream_st* stream);
// SiLU on fp32 tensors (the time path).
void silu_forward(const float* x, float* y, int64_t n, CUstream_st* stream);
void silu_backward(const float* x, const float* dy, float* dx, int64_t n, CUstream_st* stream);

}  // namespace ms::cuda
