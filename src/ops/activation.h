// Pointwise activations: GELU (tanh approximation, torch approximate="tanh") and SiLU.
#pragma once
#include <cstdint>

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
