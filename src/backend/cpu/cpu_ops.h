// The CPU ops policy of model/block_impl.h: every op is the src/ops CPU kernel on T, activations,
// statistics, weights and gradients alike.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/dsa.h"
#include "ops/dwconv3d.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/patchify.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/window_attention.h"

namespace ms {

template <class T>
struct CpuOps {
  using Act = T;
  using Stat = T;
  using Weight = T;
  using Grad = T;
  using Io = T;  // the model's inputs (latents, timesteps, context) and output (velocity)
  static constexpr bool kFusedNormModulate = false;  // the normalised tensor is kept for modulate_backward

  void zero(T* p, int64_t n) { std::fill(p, p + n, T(0)); }
  void copy(T* dst, const T* src, int64_t n) { std::memcpy(dst, src, sizeof(T) * size_t(n)); }

  void modulation_forward(const T* param, const T* e, T* mod, int64_t B, int64_t K, int64_t C, bool per_chunk) {
    cpu::modulation_forward(param, e, mod, B, K, C, per_chunk);
  }
  void modulation_backward(const T* dmod, T* dparam, T* de, int64_t B, int64_t K, int64_t C, bool per_chunk) {
    cpu::modulation_backward(dmod, dparam, de, B, K, C, per_chunk);
  }
  // LayerNorm without affine (into ln) followed by the modulation: y = ln * (1 + scale) + shift.
  void norm_modulate_forward(const T* x, const T* shift, const T* scale, T* ln, T* y, T* mean, T* rstd, int64_t B,
                             int64_t L, int64_t C, int64_t stride, double eps) {
    cpu::layernorm_forward<T>(x, nullptr, nullptr, ln, mean, rstd, B * L, C, eps);
    cpu::modulate_forward(ln, shift, scale, y, B, L, C, stride);
  }
  // Inverts it: dx +=, dshift, dscale +=; tmp [B*L, C] is clobbered.
  void norm_modulate_backward(const T* x, const T* ln, const T* mean, const T* rstd, const T* scale, const T* dy,
                              T* tmp, T* dx, T* dshift, T* dscale, int64_t B, int64_t L, int64_t C, int64_t stride) {
    zero(tmp, B * L * C);
    cpu::modulate_backward(ln, scale, dy, tmp, dshift, dscale, B, L, C, stride);
    cpu::layernorm_backward<T>(x, nullptr, mean, rstd, tmp, dx, nullptr, nullptr, B * L, C);
  }
  void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, int64_t C, double eps) {
    cpu::layernorm_forward(x, w, b, y, mean, rstd, N, C, eps);
  }
  void layernorm_backward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy, T* dx, T* dw, T* db,
                          int64_t N, int64_t C) {
    cpu::layernorm_backward(x, w, mean, rstd, dy, dx, dw, db, N, C);
  }
  void rmsnorm_forward(const T* x, const T* w, T* y, T* rstd, int64_t N, int64_t C, double eps) {
    cpu::rmsnorm_forward(x, w, y, rstd, N, C, eps);
  }
  void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, int64_t N, int64_t C) {
    cpu::rmsnorm_backward(x, w, rstd, dy, dx, dw, N, C);
  }
  void linear_forward(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t in, int64_t out) {
    cpu::linear_forward(x, w, b, y, N, in, out);
  }
  void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t N, int64_t in, int64_t out) {
    cpu::linear_backward(x, w, dy, dx, dw, db, N, in, out);
  }
  void rope_forward(const T* x, T* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d) {
    cpu::rope_forward(x, y, B, F, H, W, nh, d);
  }
  void rope_backward(const T* dy, T* dx, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d) {
    cpu::rope_backward(dy, dx, B, F, H, W, nh, d);
  }
  // The time path (B rows; fp32 on the GPU): the same linear and SiLU here.
  void time_linear_forward(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t in, int64_t out) {
    cpu::linear_forward(x, w, b, y, N, in, out);
  }
  void time_linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t N, int64_t in,
                            int64_t out) {
    cpu::linear_backward(x, w, dy, dx, dw, db, N, in, out);
  }
  void time_silu_forward(const T* x, T* y, int64_t n) { cpu::silu_forward(x, y, n); }
  void time_silu_backward(const T* x, const T* dy, T* dx, int64_t n) { cpu::silu_backward(x, dy, dx, n); }
  void sinusoidal_embedding(const T* t, T* out, int64_t B, int64_t dim) { cpu::sinusoidal_embedding(t, out, B, dim); }
  void pad_context_forward(const T* context, T* padded, int64_t B, int64_t Lc, int64_t Lt, int64_t C) {
    cpu::pad_context_forward(context, padded, B, Lc, Lt, C);
  }
  void pad_context_backward(const T* dpadded, T* dcontext, int64_t B, int64_t Lc, int64_t Lt, int64_t C) {
    cpu::pad_context_backward(dpadded, dcontext, B, Lc, Lt, C);
  }
  void patchify_forward(const T* latents, T* patches, const PatchDims& d) {
    cpu::patchify_forward(latents, patches, d);
  }
  void patchify_backward(const T* dpatches, T* dlatents, const PatchDims& d) {
    cpu::patchify_backward(dpatches, dlatents, d);
  }
  void unpatchify_forward(const T* tokens, T* video, const PatchDims& d) { cpu::unpatchify_forward(tokens, video, d); }
  void unpatchify_backward(const T* dvideo, T* dtokens, const PatchDims& d) {
    cpu::unpatchify_backward(dvideo, dtokens, d);
  }
  void gelu_tanh_forward(const T* x, T* y, int64_t n) { cpu::gelu_tanh_forward(x, y, n); }
  void gelu_tanh_backward(const T* x, const T* dy, T* dx, int64_t n) { cpu::gelu_tanh_backward(x, dy, dx, n); }
  void gate_residual_forward(const T* x, const T* y, const T* gate, T* out, int64_t B, int64_t L, int64_t C,
                             int64_t stride) {
    cpu::gate_residual_forward(x, y, gate, out, B, L, C, stride);
  }
  void gate_residual_backward(const T* y, const T* gate, const T* dout, T* dx, T* dy, T* dgate, int64_t B, int64_t L,
                              int64_t C, int64_t stride) {
    cpu::gate_residual_backward(y, gate, dout, dx, dy, dgate, B, L, C, stride);
  }
  void window_attention_forward(const WindowAttentionParams<T>& p) { cpu::window_attention_forward(p); }
  void window_attention_backward(const WindowAttentionParams<T>& p) { cpu::window_attention_backward(p); }
  void dsa_forward(const DsaParams<T>& p) { cpu::dsa_forward(p); }
  void dsa_backward(const DsaParams<T>& p) { cpu::dsa_backward(p); }
  // DSA's offset network: the depthwise convolution and the offsets' squashing.
  void dwconv3d_forward(const T* x, const T* w, const T* b, T* y, int64_t B, int64_t Tn, int64_t H, int64_t W,
                        int64_t C) {
    cpu::dwconv3d_forward(x, w, b, y, B, Tn, H, W, C);
  }
  void dwconv3d_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t B, int64_t Tn, int64_t H,
                         int64_t W, int64_t C) {
    cpu::dwconv3d_backward(x, w, dy, dx, dw, db, B, Tn, H, W, C);
  }
  void dsa_offsets_forward(const DsaOffsetsParams<T>& p) { cpu::dsa_offsets_forward(p); }
  void dsa_offsets_backward(const DsaOffsetsParams<T>& p) { cpu::dsa_offsets_backward(p); }
  void attention_forward(const AttentionParams<T>& p) { cpu::attention_forward(p); }
  void attention_backward(const AttentionParams<T>& p) { cpu::attention_backward(p); }
};

}  // namespace ms
