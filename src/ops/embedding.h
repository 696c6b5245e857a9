// Inputs that have no parameters: the sinusoidal timestep embedding and text-context padding.
#pragma once
#include <cstdint>

namespace ms::cpu {

// t [B] (already t*1000) -> out [B, dim]: half = dim/2, out[b, i] = cos(t * 10000^(-i/half)),
// out[b, half + i] = sin(...), computed in float64 (Wan's sinusoidal_embedding_1d).
template <class T>
void sinusoidal_embedding(const T* t, T* out, int64_t B, int64_t dim);

// context [B, Lc, C] -> padded [B, Lt, C] with rows Lc..Lt-1 zero (Lc <= Lt).
template <class T>
void pad_context_forward(const T* context, T* padded, int64_t B, int64_t Lc, int64_t Lt, int64_t C);
// Inverts pad_context_forward: dcontext [B, Lc, C] (overwritten) = the first Lc rows of dpadded.
template <class T>
void pad_context_backward(const T* dpadded, T* dcontext, int64_t B, int64_t Lc, int64_t Lt, int64_t C);

}  // namespace ms::cpu
