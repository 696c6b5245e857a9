// The block's forward and backward written once over an ops policy (backend/cpu/cpu_ops.h, backend/cuda/cuda_ops.h):
// the policy names the element types (Act for activations, Stat for statistics and the modulation, Weight, Grad)
// and supplies every op with the CPU contract of src/ops. block.cpp instantiates it for the CPU, the CUDA backend
// for the GPU. Every attention type runs on both.
#pragma once
#include <cstdint>

#include "model/attention_core.h"
#include "model/block.h"
#include "ops/attention.h"
#include "ops/dsa.h"

namespace ms::block_impl {

template <class Ops>
using Acts = BlockActs<typename Ops::Act, typename Ops::Stat>;
template <class Ops>
using Grads = BlockGrads<typename Ops::Act, typename Ops::Stat>;
template <class Ops>
using Weights = BlockW<const typename Ops::Weight*>;
template <class Ops>
using WeightGrads = BlockW<typename Ops::Grad*>;

// Linear followed by RMSNorm: y = rms(x W^T + b) * norm_w (Wan's q/k projections).
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight>
void linear_rms_forward(Ops& ops, const LinearW<const W*>& l, const W* norm_w, const A* x, A* lin, S* rstd, A* y,
                        int64_t N, int64_t D, double eps) {
  ops.linear_forward(x, l.w, l.b, lin, N, D, D);
  ops.rmsnorm_forward(lin, norm_w, y, rstd, N, D, eps);
}

// Inverts linear_rms_forward: dx +=, grads +=; `scratch` [N, D] is clobbered.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class G = typename Ops::Grad>
void linear_rms_backward(Ops& ops, const LinearW<const W*>& l, const W* norm_w, const A* x, const A* lin, const S* rstd,
                         const A* dy, A* scratch, A* dx, const LinearW<G*>& gl, G* gnorm, int64_t N, int64_t D) {
  ops.zero(scratch, N * D);
  ops.rmsnorm_backward(lin, norm_w, rstd, dy, scratch, gnorm, N, D);
  ops.linear_backward(x, l.w, scratch, dx, gl.w, gl.b, N, D, D);
}

inline bool window_shifted(const ModelConfig& c, int64_t index) { return c.attention.shift && index % 2 == 1; }

inline VideoAttentionDims video_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, d.f, d.h, d.w, c.num_heads, c.head_dim()};
}

// DSA's offset network: offsets [N, G*P*3] = range * tanh(offset_proj(GELU(offset_conv(xn)))).
template <class Ops, class A = typename Ops::Act>
void offset_net_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, const Weights<Ops>& w, const Acts<Ops>& a) {
  const int64_t N = d.N(), D = c.dim, GP = c.groups() * c.attention.slots();
  ops.dwconv3d_forward(a.xn, w.offset_conv_w, w.offset_conv_b, a.off_h, d.B, d.f, d.h, d.w, D);
  ops.gelu_tanh_forward(a.off_h, a.off_g, N * D);
  ops.linear_forward(a.off_g, w.offset_proj.w, w.offset_proj.b, a.off_raw, N, D, GP * 3);
  ops.dsa_offsets_forward(
      DsaOffsetsParams<A>{.raw = a.off_raw, .offsets = a.offsets, .range = c.attention.offset_range, .N = N, .M = GP});
}

// Inverts offset_net_forward given doff [N, G*P*3] (clobbered): dxn [N, D] +=, parameter grads +=;
// s1, s2 [N, D] are scratch.
template <class Ops, class A = typename Ops::Act>
void offset_net_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, const Weights<Ops>& w, const Acts<Ops>& a,
                         A* doff, A* s1, A* s2, A* dxn, const WeightGrads<Ops>& gw) {
  const int64_t N = d.N(), D = c.dim, GP = c.groups() * c.attention.slots();
  ops.dsa_offsets_backward(DsaOffsetsParams<A>{
      .raw = a.off_raw, .doffsets = doff, .draw = doff, .range = c.attention.offset_range, .N = N, .M = GP});
  ops.zero(s1, N * D);
  ops.linear_backward(a.off_g, w.offset_proj.w, doff, s1, gw.offset_proj.w, gw.offset_proj.b, N, D, GP * 3);
  ops.zero(s2, N * D);
  ops.gelu_tanh_backward(a.off_h, s1, s2, N * D);
  ops.dwconv3d_backward(a.xn, w.offset_conv_w, s2, dxn, gw.offset_conv_w, gw.offset_conv_b, d.B, d.f, d.h, d.w, D);
}

// The self-attention core of block `index` (model/attention_core.h).
inline AttentionSpec attention_spec(const ModelConfig& c, const ModelDims& d, int64_t index) {
  return {.type = c.attention.type,
          .dims = video_dims(c, d),
          .window = c.attention.window,
          .shifted = window_shifted(c, index),
          .groups = c.groups()};
}

// The self-attention core on the roped q, k and v: attn, attn_lse from acts (dsa runs its offset network first).
template <class Ops>
void self_attention_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Weights<Ops>& w,
                            const Acts<Ops>& a) {
  if (c.attention.has_offsets()) offset_net_forward(ops, c, d, w, a);
  attention_forward(ops, attention_spec(c, d, index), {.q = a.q, .k = a.k, .v = a.v, .out = a.attn, .lse = a.attn_lse},
                    a.offsets);
}

// Inverts the attention core of self_attention_forward given dattn [N, D]: dq, dk, dv [N, D] +=, and for dsa
// doff [N, G*P*3] += (the offset network is inverted by the caller, after q, k and v).
template <class Ops, class A = typename Ops::Act>
void self_attention_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Acts<Ops>& a,
                             const A* dattn, A* dq, A* dk, A* dv, A* doff) {
  attention_backward(
      ops, attention_spec(c, d, index),
      {.q = a.q, .k = a.k, .v = a.v, .out = a.attn, .lse = a.attn_lse, .dout = dattn, .dq = dq, .dk = dk, .dv = dv},
      a.offsets, doff);
}

// Block `index` (its parity decides the window shift): x [B, L, D], e0 [B, 6, D], ctx [B, Lt, D] -> out [B, L, D];
// fills acts.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat>
void block_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Weights<Ops>& w, const A* x,
                   const S* e0, const A* ctx, const Acts<Ops>& a, A* out) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Nc = d.B * d.Lt, S6 = 6 * D;
  ops.modulation_forward(w.modulation, e0, a.mod, B, 6, D, true);
  // self-attention
  ops.norm_modulate_forward(x, a.mod, a.mod + D, a.ln1, a.xn, a.ln1_mean, a.ln1_rstd, B, L, D, S6, c.eps);
  linear_rms_forward(ops, w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, a.q, N, D, c.eps);
  linear_rms_forward(ops, w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, a.k, N, D, c.eps);
  ops.linear_forward(a.xn, w.self_attn.v.w, w.self_attn.v.b, a.v, N, D, D);
  const int64_t nh = c.num_heads, hd = c.head_dim();
  ops.rope_forward(a.q, a.q, B, d.f, d.h, d.w, nh, hd);
  ops.rope_forward(a.k, a.k, B, d.f, d.h, d.w, nh, hd);
  self_attention_forward(ops, c, d, index, w, a);
  ops.linear_forward(a.attn, w.self_attn.o.w, w.self_attn.o.b, a.o, N, D, D);
  ops.gate_residual_forward(x, a.o, a.mod + 2 * D, a.x1, B, L, D, S6);
  // cross-attention (no gate)
  ops.layernorm_forward(a.x1, w.norm3_w, w.norm3_b, a.xc, a.ln3_mean, a.ln3_rstd, N, D, c.eps);
  linear_rms_forward(ops, w.cross_attn.q, w.cross_attn.norm_q, a.xc, a.qc_lin, a.qc_rstd, a.qc, N, D, c.eps);
  linear_rms_forward(ops, w.cross_attn.k, w.cross_attn.norm_k, ctx, a.kc_lin, a.kc_rstd, a.kc, Nc, D, c.eps);
  ops.linear_forward(ctx, w.cross_attn.v.w, w.cross_attn.v.b, a.vc, Nc, D, D);
  ops.attention_forward(
      AttentionParams<A, S>{{.q = a.qc, .k = a.kc, .v = a.vc, .out = a.yc, .lse = a.yc_lse}, {B, L, d.Lt, nh, hd}});
  ops.linear_forward(a.yc, w.cross_attn.o.w, w.cross_attn.o.b, a.x2, N, D, D);
  ops.gate_residual_forward(a.x1, a.x2, static_cast<const S*>(nullptr), a.x2, B, L, D, S6);
  // feed-forward
  ops.norm_modulate_forward(a.x2, a.mod + 3 * D, a.mod + 4 * D, a.ln2, a.xf, a.ln2_mean, a.ln2_rstd, B, L, D, S6,
                            c.eps);
  ops.linear_forward(a.xf, w.ffn0.w, w.ffn0.b, a.ffn_h, N, D, c.ffn_dim);
  ops.gelu_tanh_forward(a.ffn_h, a.ffn_g, N * c.ffn_dim);
  ops.linear_forward(a.ffn_g, w.ffn2.w, w.ffn2.b, a.ffn_out, N, c.ffn_dim, D);
  ops.gate_residual_forward(a.x2, a.ffn_out, a.mod + 5 * D, out, B, L, D, S6);
}

// Inverts block_forward: recomputes it from x into acts (unless !recompute: acts then hold this block's forward),
// then from dout [B, L, D] writes dx [B, L, D] (overwritten; may alias dout) and accumulates de0 [B, 6, D],
// dctx [B, Lt, D] and the parameter grads gw.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat>
void block_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Weights<Ops>& w,
                    const A* x, const S* e0, const A* ctx, const Acts<Ops>& a, const Grads<Ops>& g, const A* dout,
                    A* dx, S* de0, A* dctx, const WeightGrads<Ops>& gw, bool recompute = true) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Fd = c.ffn_dim, Nc = d.B * d.Lt, S6 = 6 * D;
  const int64_t nh = c.num_heads, hd = c.head_dim();
  A* x3 = g.e;  // the recomputed output is not needed; g.e is free until the self-attention part
  if (recompute) block_forward(ops, c, d, index, w, x, e0, ctx, a, x3);
  if (dx != dout) ops.copy(dx, dout, N * D);
  A* dres = dx;  // gradient flowing along the residual stream
  ops.zero(g.mod, B * S6);
  // feed-forward: out = x2 + ffn_out * gate2
  ops.zero(g.a, N * D);
  ops.gate_residual_backward(a.ffn_out, a.mod + 5 * D, dres, static_cast<A*>(nullptr), g.a, g.mod + 5 * D, B, L, D, S6);
  ops.zero(g.f1, N * Fd);
  ops.linear_backward(a.ffn_g, w.ffn2.w, g.a, g.f1, gw.ffn2.w, gw.ffn2.b, N, Fd, D);
  ops.zero(g.f2, N * Fd);
  ops.gelu_tanh_backward(a.ffn_h, g.f1, g.f2, N * Fd);
  ops.zero(g.b, N * D);
  ops.linear_backward(a.xf, w.ffn0.w, g.f2, g.b, gw.ffn0.w, gw.ffn0.b, N, D, Fd);
  ops.norm_modulate_backward(a.x2, a.ln2, a.ln2_mean, a.ln2_rstd, a.mod + 4 * D, g.b, g.c, dres, g.mod + 3 * D,
                             g.mod + 4 * D, B, L, D, S6);
  // cross-attention: x2 = x1 + o(attn(q(norm3(x1)), k(ctx), v(ctx)))
  ops.zero(g.a, N * D);
  ops.linear_backward(a.yc, w.cross_attn.o.w, dres, g.a, gw.cross_attn.o.w, gw.cross_attn.o.b, N, D, D);
  ops.zero(g.b, N * D);
  ops.zero(g.kc, Nc * D);
  ops.zero(g.vc, Nc * D);
  ops.attention_backward(AttentionParams<A, S>{
      {.q = a.qc, .k = a.kc, .v = a.vc, .out = a.yc, .lse = a.yc_lse, .dout = g.a, .dq = g.b, .dk = g.kc, .dv = g.vc},
      {B, L, d.Lt, nh, hd}});
  ops.zero(g.d, N * D);
  linear_rms_backward(ops, w.cross_attn.q, w.cross_attn.norm_q, a.xc, a.qc_lin, a.qc_rstd, g.b, g.c, g.d,
                      gw.cross_attn.q, gw.cross_attn.norm_q, N, D);
  linear_rms_backward(ops, w.cross_attn.k, w.cross_attn.norm_k, ctx, a.kc_lin, a.kc_rstd, g.kc, g.kl, dctx,
                      gw.cross_attn.k, gw.cross_attn.norm_k, Nc, D);
  ops.linear_backward(ctx, w.cross_attn.v.w, g.vc, dctx, gw.cross_attn.v.w, gw.cross_attn.v.b, Nc, D, D);
  ops.layernorm_backward(a.x1, w.norm3_w, a.ln3_mean, a.ln3_rstd, g.d, dres, gw.norm3_w, gw.norm3_b, N, D);
  // self-attention: x1 = x + o(attn(rope(q(xn)), rope(k(xn)), v(xn)[, offsets(xn)])) * gate1
  ops.zero(g.a, N * D);
  ops.gate_residual_backward(a.o, a.mod + 2 * D, dres, static_cast<A*>(nullptr), g.a, g.mod + 2 * D, B, L, D, S6);
  ops.zero(g.b, N * D);
  ops.linear_backward(a.attn, w.self_attn.o.w, g.a, g.b, gw.self_attn.o.w, gw.self_attn.o.b, N, D, D);
  A *dq = g.c, *dk = g.a, *dv = g.d, *dxn = g.e;
  ops.zero(dq, N * D);
  ops.zero(dk, N * D);
  ops.zero(dv, N * D);
  ops.zero(g.off, c.attention.has_offsets() ? N * c.groups() * c.attention.slots() * 3 : 0);
  self_attention_backward(ops, c, d, index, a, g.b, dq, dk, dv, g.off);
  ops.rope_backward(dq, dq, B, d.f, d.h, d.w, nh, hd);
  ops.rope_backward(dk, dk, B, d.f, d.h, d.w, nh, hd);
  ops.zero(dxn, N * D);
  linear_rms_backward(ops, w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, dq, g.b, dxn, gw.self_attn.q,
                      gw.self_attn.norm_q, N, D);
  linear_rms_backward(ops, w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, dk, g.b, dxn, gw.self_attn.k,
                      gw.self_attn.norm_k, N, D);
  ops.linear_backward(a.xn, w.self_attn.v.w, dv, dxn, gw.self_attn.v.w, gw.self_attn.v.b, N, D, D);
  if (c.attention.has_offsets()) offset_net_backward(ops, c, d, w, a, g.off, dq, dk, dxn, gw);  // dq, dk are free
  ops.norm_modulate_backward(x, a.ln1, a.ln1_mean, a.ln1_rstd, a.mod + D, dxn, g.b, dres, g.mod, g.mod + D, B, L, D,
                             S6);
  // modulation + e0: the parameter is shared by the batch
  ops.modulation_backward(g.mod, gw.modulation, de0, B, 6, D, true);
}

}  // namespace ms::block_impl
