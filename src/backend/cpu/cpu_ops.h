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

  void modulation_forward(const ModulationParams<T>& p) { cpu::modulation_forward(p); }
  void modulation_backward(const ModulationParams<T>& p) { cpu::modulation_backward(p); }
  // The LayerNorm (no affine) into p.ln, then the modulation; the backward clobbers p.tmp.
  void norm_modulate_forward(const NormModulateParams<T>& p) {
    cpu::layernorm_forward<T>(
        {.x = p.x, .y = p.ln, .mean = p.mean, .rstd = p.rstd, .N = p.B * p.L, .C = p.C, .eps = p.eps});
    cpu::modulate_forward<T>(
        {.x = p.ln, .shift = p.shift, .scale = p.scale, .y = p.y, .B = p.B, .L = p.L, .C = p.C, .stride = p.stride});
  }
  void norm_modulate_backward(const NormModulateParams<T>& p) {
    zero(p.tmp, p.B * p.L * p.C);
    cpu::modulate_backward<T>({.x = p.ln,
                               .scale = p.scale,
                               .dy = p.dy,
                               .dx = p.tmp,
                               .dshift = p.dshift,
                               .dscale = p.dscale,
                               .B = p.B,
                               .L = p.L,
                               .C = p.C,
                               .stride = p.stride});
    cpu::layernorm_backward<T>(
        {.x = p.x, .mean = p.mean, .rstd = p.rstd, .dy = p.tmp, .dx = p.dx, .N = p.B * p.L, .C = p.C});
  }
  void layernorm_forward(const LayerNormParams<T>& p) { cpu::layernorm_forward(p); }
  void layernorm_backward(const LayerNormParams<T>& p) { cpu::layernorm_backward(p); }
  void rmsnorm_forward(const RmsNormParams<T>& p) { cpu::rmsnorm_forward(p); }
  void rmsnorm_backward(const RmsNormParams<T>& p) { cpu::rmsnorm_backward(p); }
  void linear_forward(const LinearParams<T>& p) { cpu::linear_forward(p); }
  void linear_backward(const LinearParams<T>& p) { cpu::linear_backward(p); }
  void rope_forward(const RopeParams<T>& p) { cpu::rope_forward(p); }
  void rope_backward(const RopeParams<T>& p) { cpu::rope_backward(p); }
  // The time path (B rows; fp32 on the GPU): the same linear and SiLU here.
  void time_linear_forward(const LinearParams<T>& p) { cpu::linear_forward(p); }
  void time_linear_backward(const LinearParams<T>& p) { cpu::linear_backward(p); }
  void time_silu_forward(const ActivationParams<T>& p) { cpu::silu_forward(p); }
  void time_silu_backward(const ActivationParams<T>& p) { cpu::silu_backward(p); }
  void sinusoidal_embedding(const SinusoidalParams<T>& p) { cpu::sinusoidal_embedding(p); }
  void pad_context_forward(const PadContextParams<T>& p) { cpu::pad_context_forward(p); }
  void pad_context_backward(const PadContextParams<T>& p) { cpu::pad_context_backward(p); }
  void patchify_forward(const PatchifyParams<T>& p) { cpu::patchify_forward(p); }
  void patchify_backward(const PatchifyParams<T>& p) { cpu::patchify_backward(p); }
  void unpatchify_forward(const UnpatchifyParams<T>& p) { cpu::unpatchify_forward(p); }
  void unpatchify_backward(const UnpatchifyParams<T>& p) { cpu::unpatchify_backward(p); }
  void gelu_tanh_forward(const ActivationParams<T>& p) { cpu::gelu_tanh_forward(p); }
  void gelu_tanh_backward(const ActivationParams<T>& p) { cpu::gelu_tanh_backward(p); }
  void gate_residual_forward(const GateResidualParams<T>& p) { cpu::gate_residual_forward(p); }
  void gate_residual_backward(const GateResidualParams<T>& p) { cpu::gate_residual_backward(p); }
  void window_attention_forward(const WindowAttentionParams<T>& p) { cpu::window_attention_forward(p); }
  void window_attention_backward(const WindowAttentionParams<T>& p) { cpu::window_attention_backward(p); }
  void dsa_forward(const DsaParams<T>& p) { cpu::dsa_forward(p); }
  void dsa_backward(const DsaParams<T>& p) { cpu::dsa_backward(p); }
  // DSA's offset network: the depthwise convolution and the offsets' squashing.
  void dwconv3d_forward(const Dwconv3dParams<T>& p) { cpu::dwconv3d_forward(p); }
  void dwconv3d_backward(const Dwconv3dParams<T>& p) { cpu::dwconv3d_backward(p); }
  void dsa_offsets_forward(const DsaOffsetsParams<T>& p) { cpu::dsa_offsets_forward(p); }
  void dsa_offsets_backward(const DsaOffsetsParams<T>& p) { cpu::dsa_offsets_backward(p); }
  void attention_forward(const AttentionParams<T>& p) { cpu::attention_forward(p); }
  void attention_backward(const AttentionParams<T>& p) { cpu::attention_backward(p); }
};

}  // namespace ms
