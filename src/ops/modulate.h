// AdaLN modulation and gated residuals, per batch sample b over its L tokens.
#pragma once
#include <cstdint>

namespace ms::cpu {

// y[b,l,c] = x[b,l,c] * (1 + scale[b*stride + c]) + shift[b*stride + c].
// x, y [B, L, C]; shift, scale point at row b=0 of tensors whose rows are `stride` apart
// (stride = 6*C for the block's e0 chunks, 2*C for the head's).
template <class T>
void modulate_forward(const T* x, const T* shift, const T* scale, T* y, int64_t B, int64_t L, int64_t C,
                      int64_t stride);

// Inverts modulate_forward. dx += dy*(1+scale) (skipped when dx is null); dshift[b*stride+c] += sum_l dy;
// dscale[b*stride+c] += sum_l dy*x.
template <class T>
void modulate_backward(const T* x, const T* scale, const T* dy, T* dx, T* dshift, T* dscale, int64_t B, int64_t L,
                       int64_t C, int64_t stride);

// out[b,l,c] = x[b,l,c] + y[b,l,c] * gate[b*stride + c]   (gate null: gate = 1).
template <class T>
void gate_residual_forward(const T* x, const T* y, const T* gate, T* out, int64_t B, int64_t L, int64_t C,
                           int64_t stride);

// Inverts gate_residual_forward given dout. dx += dout (skipped when dx is null); dy += dout*gate;
// dgate[b*stride+c] += sum_l dout*y (skipped when gate is null).
template <class T>
void gate_residual_backward(const T* y, const T* gate, const T* dout, T* dx, T* dy, T* dgate, int64_t B, int64_t L,
                            int64_t C, int64_t stride);

// The stages' AdaLN modulation from the time embedding: mod[b, i, c] = param[i*C + c] + e[b, i, c] for
// param [K, C] and mod [B, K, C]; e is [B, K, C] when per_chunk (the block's e0), else [B, C] shared by the K chunks
// (the head's e).
template <class T>
void modulation_forward(const T* param, const T* e, T* mod, int64_t B, int64_t K, int64_t C, bool per_chunk);

// Inverts modulation_forward given dmod [B, K, C]: dparam += sum over b, de += dmod (summed over i when shared), in
// the order b, i.
template <class T>
void modulation_backward(const T* dmod, T* dparam, T* de, int64_t B, int64_t K, int64_t C, bool per_chunk);

}  // namespace ms::cpu
