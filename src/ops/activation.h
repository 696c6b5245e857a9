// Pointwise activations: GELU (tanh approximation, torch approximate="tanh") and SiLU.
#pragma once
#include <cstdint>

namespace ms {

// The forward maps x into y; the backward accumulates dx += dy * act'(x).
template <class T>
struct ActivationParams {
  const T* x = nullptr;   // [n]
  T* y = nullptr;         // [n]
  const T* dy = nullptr;  // [n]
  T* dx = nullptr;        // [n] +=
  int64_t n = 0;
};

}  // namespace ms

namespace ms::cpu {

// y[i] = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
template <class T>
void gelu_tanh_forward(const ActivationParams<T>& p);
template <class T>
void gelu_tanh_backward(const ActivationParams<T>& p);
// y[i] = x / (1 + exp(-x)).
template <class T>
void silu_forward(const ActivationParams<T>& p);
template <class T>
void silu_backward(const ActivationParams<T>& p);

}  // namespace ms::cpu
