// Inputs that have no parameters: the sinusoidal timestep embedding and text-context padding.
#pragma once
#include <cstdint>

namespace ms {

// t [B] (already t*1000) -> out [B, dim]: half = dim/2, out[b, i] = cos(t * 10000^(-i/half)),
// out[b, half + i] = sin(...), computed in float64 (Wan's sinusoidal_embedding_1d).
template <class T>
struct SinusoidalParams {
  const T* t = nullptr;  // [B]
  T* out = nullptr;      // [B, dim]
  int64_t B = 0, dim = 0;
};

// The forward copies context into padded with rows Lc..Lt-1 zero (Lc <= Lt); the backward writes dcontext
// (overwritten) = the first Lc rows of dpadded. I = the context's element type (the model's input), A = the padded
// tensor's (the activations').
template <class I, class A = I>
struct PadContextParams {
  const I* context = nullptr;  // [B, Lc, C]
  A* padded = nullptr;         // [B, Lt, C]
  const A* dpadded = nullptr;  // [B, Lt, C]
  I* dcontext = nullptr;       // [B, Lc, C]
  int64_t B = 0, Lc = 0, Lt = 0, C = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void sinusoidal_embedding(const SinusoidalParams<T>& p);
template <class T>
void pad_context_forward(const PadContextParams<T>& p);
template <class T>
void pad_context_backward(const PadContextParams<T>& p);

}  // namespace ms::cpu
