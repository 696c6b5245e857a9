#include "model/block.h"

#include <algorithm>
#include <cstring>

#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/dsa.h"
#include "ops/dwconv3d.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/window_attention.h"

namespace ms {
namespace {

template <class T>
void zero(T* p, int64_t n) {
  std::fill(p, p + n, T(0));
}

// Linear followed by RMSNorm: y = rms(x W^T + b) * norm_w (Wan's q/k projections).
template <class T>
void linear_rms_forward(const LinearW<const T*>& l, const T* norm_w, const T* x, T* lin, T* rstd, T* y, int64_t N,
                        int64_t D, double eps) {
  cpu::linear_forward(x, l.w, l.b, lin, N, D, D);
  cpu::rmsnorm_forward(lin, norm_w, y, rstd, N, D, eps);
}

// Inverts linear_rms_forward: dx +=, grads +=; `scratch` [N, D] is clobbered.
template <class T>
void linear_rms_backward(const LinearW<const T*>& l, const T* norm_w, const T* x, const T* lin, const T* rstd,
                         const T* dy, T* scratch, T* dx, const LinearW<T*>& gl, T* gnorm, int64_t N, int64_t D) {
  zero(scratch, N * D);
  cpu::rmsnorm_backward(lin, norm_w, rstd, dy, scratch, gnorm, N, D);
  cpu::linear_backward(x, l.w, scratch, dx, gl.w, gl.b, N, D, D);
}

// DSA's offset network: offsets [N, G*P*3] = range * tanh(offset_proj(GELU(offset_conv(xn)))).
template <class T>
void offset_net_forward(const ModelConfig& c, const ModelDims& d, const BlockW<const T*>& w, const BlockActs<T>& a) {
  const int64_t N = d.N(), D = c.dim, GP = c.groups() * c.attention.slots();
  cpu::dwconv3d_forward(a.xn, w.offset_conv_w, w.offset_conv_b, a.off_h, d.B, d.f, d.h, d.w, D);
  cpu::gelu_tanh_forward(a.off_h, a.off_g, N * D);
  cpu::linear_forward(a.off_g, w.offset_proj.w, w.offset_proj.b, a.off_raw, N, D, GP * 3);
  cpu::dsa_offsets_forward(a.off_raw, a.offsets, c.attention.offset_range, N, GP);
}

// Inverts offset_net_forward given doff [N, G*P*3] (clobbered): dxn [N, D] +=, parameter grads +=;
// s1, s2 [N, D] are scratch.
template <class T>
void offset_net_backward(const ModelConfig& c, const ModelDims& d, const BlockW<const T*>& w, const BlockActs<T>& a,
                         T* doff, T* s1, T* s2, T* dxn, const BlockW<T*>& gw) {
  const int64_t N = d.N(), D = c.dim, GP = c.groups() * c.attention.slots();
  cpu::dsa_offsets_backward(a.off_raw, doff, doff, c.attention.offset_range, N, GP);
  zero(s1, N * D);
  cpu::linear_backward(a.off_g, w.offset_proj.w, doff, s1, gw.offset_proj.w, gw.offset_proj.b, N, D, GP * 3);
  zero(s2, N * D);
  cpu::gelu_tanh_backward(a.off_h, s1, s2, N * D);
  cpu::dwconv3d_backward(a.xn, w.offset_conv_w, s2, dxn, gw.offset_conv_w, gw.offset_conv_b, d.B, d.f, d.h, d.w, D);
}

bool window_shifted(const ModelConfig& c, int64_t index) { return c.attention.shift && index % 2 == 1; }

cpu::VideoAttentionDims video_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, d.f, d.h, d.w, c.num_heads, c.head_dim()};
}

// The self-attention core on the roped q, k and v: attn, attn_lse from acts (dsa runs its offset network first).
template <class T>
void self_attention_forward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w,
                            const BlockActs<T>& a) {
  const auto& at = c.attention;
  if (at.type == "dense") {
    cpu::attention_forward(a.q, a.k, a.v, a.attn, a.attn_lse, {d.B, d.L, d.L, c.num_heads, c.head_dim()});
  } else if (at.type == "window") {
    cpu::window_attention_forward(a.q, a.k, a.v, a.attn, a.attn_lse, video_dims(c, d), at.window,
                                  window_shifted(c, index));
  } else {  // dsa, dsa_fixed
    if (at.has_offsets()) offset_net_forward(c, d, w, a);
    cpu::dsa_forward(a.q, a.k, a.v, at.has_offsets() ? a.offsets : nullptr, a.attn, a.attn_lse, video_dims(c, d),
                     {at.window, c.groups()});
  }
}

// Inverts the attention core of self_attention_forward given dattn [N, D]: dq, dk, dv [N, D] +=, and for dsa
// doff [N, G*P*3] += (the offset network is inverted by the caller, after q, k and v).
template <class T>
void self_attention_backward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockActs<T>& a,
                             const T* dattn, T* dq, T* dk, T* dv, T* doff) {
  const auto& at = c.attention;
  if (at.type == "dense") {
    cpu::attention_backward(a.q, a.k, a.v, a.attn, a.attn_lse, dattn, dq, dk, dv,
                            {d.B, d.L, d.L, c.num_heads, c.head_dim()});
  } else if (at.type == "window") {
    cpu::window_attention_backward(a.q, a.k, a.v, a.attn, a.attn_lse, dattn, dq, dk, dv, video_dims(c, d), at.window,
                                   window_shifted(c, index));
  } else {
    const bool off = at.has_offsets();
    cpu::dsa_backward(a.q, a.k, a.v, off ? a.offsets : nullptr, a.attn, a.attn_lse, dattn, dq, dk, dv,
                      off ? doff : nullptr, video_dims(c, d), {at.window, c.groups()});
  }
}

}  // namespace

template <class T>
void block_forward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                   const T* e0, const T* ctx, const BlockActs<T>& a, T* out) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Nc = d.B * d.Lt, S = 6 * D;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i) a.mod[b * S + i] = w.modulation[i] + e0[b * S + i];
  // self-attention
  cpu::layernorm_forward<T>(x, nullptr, nullptr, a.ln1, a.ln1_mean, a.ln1_rstd, N, D, c.eps);
  cpu::modulate_forward(a.ln1, a.mod, a.mod + D, a.xn, B, L, D, S);
  linear_rms_forward(w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, a.q, N, D, c.eps);
  linear_rms_forward(w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, a.k, N, D, c.eps);
  cpu::linear_forward(a.xn, w.self_attn.v.w, w.self_attn.v.b, a.v, N, D, D);
  const int64_t nh = c.num_heads, hd = c.head_dim();
  cpu::rope_forward(a.q, a.q, B, d.f, d.h, d.w, nh, hd);
  cpu::rope_forward(a.k, a.k, B, d.f, d.h, d.w, nh, hd);
  self_attention_forward(c, d, index, w, a);
  cpu::linear_forward(a.attn, w.self_attn.o.w, w.self_attn.o.b, a.o, N, D, D);
  cpu::gate_residual_forward(x, a.o, a.mod + 2 * D, a.x1, B, L, D, S);
  // cross-attention (no gate)
  cpu::layernorm_forward(a.x1, w.norm3_w, w.norm3_b, a.xc, a.ln3_mean, a.ln3_rstd, N, D, c.eps);
  linear_rms_forward(w.cross_attn.q, w.cross_attn.norm_q, a.xc, a.qc_lin, a.qc_rstd, a.qc, N, D, c.eps);
  linear_rms_forward(w.cross_attn.k, w.cross_attn.norm_k, ctx, a.kc_lin, a.kc_rstd, a.kc, Nc, D, c.eps);
  cpu::linear_forward(ctx, w.cross_attn.v.w, w.cross_attn.v.b, a.vc, Nc, D, D);
  cpu::attention_forward(a.qc, a.kc, a.vc, a.yc, a.yc_lse, {B, L, d.Lt, nh, hd});
  cpu::linear_forward(a.yc, w.cross_attn.o.w, w.cross_attn.o.b, a.x2, N, D, D);
  cpu::gate_residual_forward<T>(a.x1, a.x2, nullptr, a.x2, B, L, D, S);
  // feed-forward
  cpu::layernorm_forward<T>(a.x2, nullptr, nullptr, a.ln2, a.ln2_mean, a.ln2_rstd, N, D, c.eps);
  cpu::modulate_forward(a.ln2, a.mod + 3 * D, a.mod + 4 * D, a.xf, B, L, D, S);
  cpu::linear_forward(a.xf, w.ffn0.w, w.ffn0.b, a.ffn_h, N, D, c.ffn_dim);
  cpu::gelu_tanh_forward(a.ffn_h, a.ffn_g, N * c.ffn_dim);
  cpu::linear_forward(a.ffn_g, w.ffn2.w, w.ffn2.b, a.ffn_out, N, c.ffn_dim, D);
  cpu::gate_residual_forward(a.x2, a.ffn_out, a.mod + 5 * D, out, B, L, D, S);
}

template <class T>
void block_backward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                    const T* e0, const T* ctx, const BlockActs<T>& a, const BlockGrads<T>& g, const T* dout, T* dx,
                    T* de0, T* dctx, const BlockW<T*>& gw) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Fd = c.ffn_dim, Nc = d.B * d.Lt, S = 6 * D;
  const int64_t nh = c.num_heads, hd = c.head_dim();
  T* x3 = g.e;  // the recomputed output is not needed; g.e is free until the self-attention part
  block_forward(c, d, index, w, x, e0, ctx, a, x3);
  if (dx != dout) std::memcpy(dx, dout, sizeof(T) * size_t(N * D));
  T* dres = dx;  // gradient flowing along the residual stream
  zero(g.mod, B * S);
  // feed-forward: out = x2 + ffn_out * gate2
  zero(g.a, N * D);
  cpu::gate_residual_backward(a.ffn_out, a.mod + 5 * D, dres, static_cast<T*>(nullptr), g.a, g.mod + 5 * D, B, L, D,
                              S);
  zero(g.f1, N * Fd);
  cpu::linear_backward(a.ffn_g, w.ffn2.w, g.a, g.f1, gw.ffn2.w, gw.ffn2.b, N, Fd, D);
  zero(g.f2, N * Fd);
  cpu::gelu_tanh_backward(a.ffn_h, g.f1, g.f2, N * Fd);
  zero(g.b, N * D);
  cpu::linear_backward(a.xf, w.ffn0.w, g.f2, g.b, gw.ffn0.w, gw.ffn0.b, N, D, Fd);
  zero(g.c, N * D);
  cpu::modulate_backward(a.ln2, a.mod + 4 * D, g.b, g.c, g.mod + 3 * D, g.mod + 4 * D, B, L, D, S);
  cpu::layernorm_backward<T>(a.x2, nullptr, a.ln2_mean, a.ln2_rstd, g.c, dres, nullptr, nullptr, N, D);
  // cross-attention: x2 = x1 + o(attn(q(norm3(x1)), k(ctx), v(ctx)))
  zero(g.a, N * D);
  cpu::linear_backward(a.yc, w.cross_attn.o.w, dres, g.a, gw.cross_attn.o.w, gw.cross_attn.o.b, N, D, D);
  zero(g.b, N * D);
  zero(g.kc, Nc * D);
  zero(g.vc, Nc * D);
  cpu::attention_backward(a.qc, a.kc, a.vc, a.yc, a.yc_lse, g.a, g.b, g.kc, g.vc, {B, L, d.Lt, nh, hd});
  zero(g.d, N * D);
  linear_rms_backward(w.cross_attn.q, w.cross_attn.norm_q, a.xc, a.qc_lin, a.qc_rstd, g.b, g.c, g.d, gw.cross_attn.q,
                      gw.cross_attn.norm_q, N, D);
  linear_rms_backward(w.cross_attn.k, w.cross_attn.norm_k, ctx, a.kc_lin, a.kc_rstd, g.kc, g.kl, dctx,
                      gw.cross_attn.k, gw.cross_attn.norm_k, Nc, D);
  cpu::linear_backward(ctx, w.cross_attn.v.w, g.vc, dctx, gw.cross_attn.v.w, gw.cross_attn.v.b, Nc, D, D);
  cpu::layernorm_backward(a.x1, w.norm3_w, a.ln3_mean, a.ln3_rstd, g.d, dres, gw.norm3_w, gw.norm3_b, N, D);
  // self-attention: x1 = x + o(attn(rope(q(xn)), rope(k(xn)), v(xn)[, offsets(xn)])) * gate1
  zero(g.a, N * D);
  cpu::gate_residual_backward(a.o, a.mod + 2 * D, dres, static_cast<T*>(nullptr), g.a, g.mod + 2 * D, B, L, D, S);
  zero(g.b, N * D);
  cpu::linear_backward(a.attn, w.self_attn.o.w, g.a, g.b, gw.self_attn.o.w, gw.self_attn.o.b, N, D, D);
  T *dq = g.c, *dk = g.a, *dv = g.d, *dxn = g.e;
  zero(dq, N * D);
  zero(dk, N * D);
  zero(dv, N * D);
  zero(g.off, c.attention.has_offsets() ? N * c.groups() * c.attention.slots() * 3 : 0);
  self_attention_backward(c, d, index, a, g.b, dq, dk, dv, g.off);
  cpu::rope_backward(dq, dq, B, d.f, d.h, d.w, nh, hd);
  cpu::rope_backward(dk, dk, B, d.f, d.h, d.w, nh, hd);
  zero(dxn, N * D);
  linear_rms_backward(w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, dq, g.b, dxn, gw.self_attn.q,
                      gw.self_attn.norm_q, N, D);
  linear_rms_backward(w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, dk, g.b, dxn, gw.self_attn.k,
                      gw.self_attn.norm_k, N, D);
  cpu::linear_backward(a.xn, w.self_attn.v.w, dv, dxn, gw.self_attn.v.w, gw.self_attn.v.b, N, D, D);
  if (c.attention.has_offsets()) offset_net_backward(c, d, w, a, g.off, dq, dk, dxn, gw);  // dq, dk are free
  zero(g.b, N * D);
  cpu::modulate_backward(a.ln1, a.mod + D, dxn, g.b, g.mod, g.mod + D, B, L, D, S);
  cpu::layernorm_backward<T>(x, nullptr, a.ln1_mean, a.ln1_rstd, g.b, dres, nullptr, nullptr, N, D);
  // modulation + e0: the parameter is shared by the batch
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < S; ++i) {
      gw.modulation[i] += g.mod[b * S + i];
      de0[b * S + i] += g.mod[b * S + i];
    }
}

#define MS_INSTANTIATE(T)                                                                                              \
  template void block_forward<T>(const ModelConfig&, const ModelDims&, int64_t, const BlockW<const T*>&, const T*,     \
                                 const T*, const T*, const BlockActs<T>&, T*);                                         \
  template void block_backward<T>(const ModelConfig&, const ModelDims&, int64_t, const BlockW<const T*>&, const T*,    \
                                  const T*, const T*, const BlockActs<T>&, const BlockGrads<T>&, const T*, T*, T*, T*, \
                                  const BlockW<T*>&);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms
