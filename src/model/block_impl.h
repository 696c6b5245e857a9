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
  ops.linear_forward({.x = x, .w = l.w, .b = l.b, .y = lin, .N = N, .in = D, .out = D});
  ops.rmsnorm_forward({.x = lin, .w = norm_w, .y = y, .rstd = rstd, .N = N, .C = D, .eps = eps});
}

// Inverts linear_rms_forward: dx +=, grads +=; `scratch` [N, D] is clobbered.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class G = typename Ops::Grad>
void linear_rms_backward(Ops& ops, const LinearW<const W*>& l, const W* norm_w, const A* x, const A* lin, S* rstd,
                         const A* dy, A* scratch, A* dx, const LinearW<G*>& gl, G* gnorm, int64_t N, int64_t D) {
  ops.zero(scratch, N * D);
  ops.rmsnorm_backward({.x = lin, .w = norm_w, .rstd = rstd, .dy = dy, .dx = scratch, .dw = gnorm, .N = N, .C = D});
  ops.linear_backward({.x = x, .w = l.w, .dy = scratch, .dx = dx, .dw = gl.w, .db = gl.b, .N = N, .in = D, .out = D});
}

inline bool window_shifted(const ModelConfig& c, int64_t index) { return c.attention.shift && index % 2 == 1; }

inline VideoAttentionDims video_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, d.f, d.h, d.w, c.num_heads, c.head_dim()};
}

// DSA's offset network: offsets [N, G*P*3] = range * tanh(offset_proj(GELU(offset_conv(xn)))).
template <class Ops, class A = typename Ops::Act>
void offset_net_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, const Weights<Ops>& w, const Acts<Ops>& a) {
  const int64_t N = d.N(), D = c.dim, GP = c.groups() * c.attention.slots();
  ops.dwconv3d_forward({.x = a.xn,
                        .w = w.offset_conv_w,
                        .b = w.offset_conv_b,
                        .y = a.off_h,
                        .B = d.B,
                        .Tn = d.f,
                        .H = d.h,
                        .W = d.w,
                        .C = D});
  ops.gelu_tanh_forward({.x = a.off_h, .y = a.off_g, .n = N * D});
  ops.linear_forward(
      {.x = a.off_g, .w = w.offset_proj.w, .b = w.offset_proj.b, .y = a.off_raw, .N = N, .in = D, .out = GP * 3});
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
  ops.linear_backward({.x = a.off_g,
                       .w = w.offset_proj.w,
                       .dy = doff,
                       .dx = s1,
                       .dw = gw.offset_proj.w,
                       .db = gw.offset_proj.b,
                       .N = N,
                       .in = D,
                       .out = GP * 3});
  ops.zero(s2, N * D);
  ops.gelu_tanh_backward({.x = a.off_h, .dy = s1, .dx = s2, .n = N * D});
  ops.dwconv3d_backward({.x = a.xn,
                         .w = w.offset_conv_w,
                         .dy = s2,
                         .dx = dxn,
                         .dw = gw.offset_conv_w,
                         .db = gw.offset_conv_b,
                         .B = d.B,
                         .Tn = d.f,
                         .H = d.h,
                         .W = d.w,
                         .C = D});
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

// Block `index` (its parity decides the window shift): x [B, L, D], e0 [Bt, 6, D], ctx [B, Lt, D] -> out [B, L, D];
// fills acts. The modulation ops see Bt = B * time_rows samples of Lr tokens: each run of tokens sharing a timestep
// is its own row of e0.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat>
void block_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Weights<Ops>& w, const A* x,
                   const S* e0, const A* ctx, const Acts<Ops>& a, A* out) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Nc = d.B * d.Lt, S6 = 6 * D;
  const int64_t Bt = d.Bt(), Lr = d.Lr();  // the modulation's rows and tokens per row
  ops.modulation_forward({.param = w.modulation, .e = e0, .mod = a.mod, .B = Bt, .K = 6, .C = D, .per_chunk = true});
  // self-attention
  ops.norm_modulate_forward({.x = x,
                             .shift = a.mod,
                             .scale = a.mod + D,
                             .ln = a.ln1,
                             .y = a.xn,
                             .mean = a.ln1_mean,
                             .rstd = a.ln1_rstd,
                             .B = Bt,
                             .L = Lr,
                             .C = D,
                             .stride = S6,
                             .eps = c.eps});
  linear_rms_forward(ops, w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, a.q, N, D, c.eps);
  linear_rms_forward(ops, w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, a.k, N, D, c.eps);
  ops.linear_forward({.x = a.xn, .w = w.self_attn.v.w, .b = w.self_attn.v.b, .y = a.v, .N = N, .in = D, .out = D});
  const int64_t nh = c.num_heads, hd = c.head_dim();
  ops.rope_forward({.x = a.q, .y = a.q, .B = B, .F = d.f, .H = d.h, .W = d.w, .nh = nh, .d = hd});
  ops.rope_forward({.x = a.k, .y = a.k, .B = B, .F = d.f, .H = d.h, .W = d.w, .nh = nh, .d = hd});
  self_attention_forward(ops, c, d, index, w, a);
  ops.linear_forward({.x = a.attn, .w = w.self_attn.o.w, .b = w.self_attn.o.b, .y = a.o, .N = N, .in = D, .out = D});
  ops.gate_residual_forward(
      {.x = x, .y = a.o, .gate = a.mod + 2 * D, .out = a.x1, .B = Bt, .L = Lr, .C = D, .stride = S6});
  // cross-attention (no gate)
  ops.layernorm_forward({.x = a.x1,
                         .w = w.norm3_w,
                         .b = w.norm3_b,
                         .y = a.xc,
                         .mean = a.ln3_mean,
                         .rstd = a.ln3_rstd,
                         .N = N,
                         .C = D,
                         .eps = c.eps});
  linear_rms_forward(ops, w.cross_attn.q, w.cross_attn.norm_q, a.xc, a.qc_lin, a.qc_rstd, a.qc, N, D, c.eps);
  linear_rms_forward(ops, w.cross_attn.k, w.cross_attn.norm_k, ctx, a.kc_lin, a.kc_rstd, a.kc, Nc, D, c.eps);
  ops.linear_forward({.x = ctx, .w = w.cross_attn.v.w, .b = w.cross_attn.v.b, .y = a.vc, .N = Nc, .in = D, .out = D});
  ops.attention_forward(
      AttentionParams<A, S>{{.q = a.qc, .k = a.kc, .v = a.vc, .out = a.yc, .lse = a.yc_lse}, {B, L, d.Lt, nh, hd}});
  ops.linear_forward({.x = a.yc, .w = w.cross_attn.o.w, .b = w.cross_attn.o.b, .y = a.x2, .N = N, .in = D, .out = D});
  ops.gate_residual_forward({.x = a.x1, .y = a.x2, .out = a.x2, .B = Bt, .L = Lr, .C = D, .stride = S6});
  // feed-forward
  ops.norm_modulate_forward({.x = a.x2,
                             .shift = a.mod + 3 * D,
                             .scale = a.mod + 4 * D,
                             .ln = a.ln2,
                             .y = a.xf,
                             .mean = a.ln2_mean,
                             .rstd = a.ln2_rstd,
                             .B = Bt,
                             .L = Lr,
                             .C = D,
                             .stride = S6,
                             .eps = c.eps});
  ops.linear_forward({.x = a.xf, .w = w.ffn0.w, .b = w.ffn0.b, .y = a.ffn_h, .N = N, .in = D, .out = c.ffn_dim});
  ops.gelu_tanh_forward({.x = a.ffn_h, .y = a.ffn_g, .n = N * c.ffn_dim});
  ops.linear_forward({.x = a.ffn_g, .w = w.ffn2.w, .b = w.ffn2.b, .y = a.ffn_out, .N = N, .in = c.ffn_dim, .out = D});
  ops.gate_residual_forward(
      {.x = a.x2, .y = a.ffn_out, .gate = a.mod + 5 * D, .out = out, .B = Bt, .L = Lr, .C = D, .stride = S6});
}

// Inverts block_forward: recomputes it from x into acts (unless !recompute: acts then hold this block's forward),
// then from dout [B, L, D] writes dx [B, L, D] (overwritten; may alias dout) and accumulates de0 [Bt, 6, D],
// dctx [B, Lt, D] and the parameter grads gw.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat>
void block_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, int64_t index, const Weights<Ops>& w,
                    const A* x, const S* e0, const A* ctx, const Acts<Ops>& a, const Grads<Ops>& g, const A* dout,
                    A* dx, S* de0, A* dctx, const WeightGrads<Ops>& gw, bool recompute = true) {
  const int64_t B = d.B, L = d.L, N = d.N(), D = c.dim, Fd = c.ffn_dim, Nc = d.B * d.Lt, S6 = 6 * D;
  const int64_t Bt = d.Bt(), Lr = d.Lr();
  const int64_t nh = c.num_heads, hd = c.head_dim();
  A* x3 = g.e;  // the recomputed output is not needed; g.e is free until the self-attention part
  if (recompute) block_forward(ops, c, d, index, w, x, e0, ctx, a, x3);
  if (dx != dout) ops.copy(dx, dout, N * D);
  A* dres = dx;  // gradient flowing along the residual stream
  ops.zero(g.mod, Bt * S6);
  // feed-forward: out = x2 + ffn_out * gate2
  ops.zero(g.a, N * D);
  ops.gate_residual_backward({.y = a.ffn_out,
                              .gate = a.mod + 5 * D,
                              .dout = dres,
                              .dy = g.a,
                              .dgate = g.mod + 5 * D,
                              .B = Bt,
                              .L = Lr,
                              .C = D,
                              .stride = S6});
  ops.zero(g.f1, N * Fd);
  ops.linear_backward({.x = a.ffn_g,
                       .w = w.ffn2.w,
                       .dy = g.a,
                       .dx = g.f1,
                       .dw = gw.ffn2.w,
                       .db = gw.ffn2.b,
                       .N = N,
                       .in = Fd,
                       .out = D});
  ops.zero(g.f2, N * Fd);
  ops.gelu_tanh_backward({.x = a.ffn_h, .dy = g.f1, .dx = g.f2, .n = N * Fd});
  ops.zero(g.b, N * D);
  ops.linear_backward(
      {.x = a.xf, .w = w.ffn0.w, .dy = g.f2, .dx = g.b, .dw = gw.ffn0.w, .db = gw.ffn0.b, .N = N, .in = D, .out = Fd});
  ops.norm_modulate_backward({.x = a.x2,
                              .scale = a.mod + 4 * D,
                              .ln = a.ln2,
                              .mean = a.ln2_mean,
                              .rstd = a.ln2_rstd,
                              .dy = g.b,
                              .tmp = g.c,
                              .dx = dres,
                              .dshift = g.mod + 3 * D,
                              .dscale = g.mod + 4 * D,
                              .B = Bt,
                              .L = Lr,
                              .C = D,
                              .stride = S6});
  // cross-attention: x2 = x1 + o(attn(q(norm3(x1)), k(ctx), v(ctx)))
  ops.zero(g.a, N * D);
  ops.linear_backward({.x = a.yc,
                       .w = w.cross_attn.o.w,
                       .dy = dres,
                       .dx = g.a,
                       .dw = gw.cross_attn.o.w,
                       .db = gw.cross_attn.o.b,
                       .N = N,
                       .in = D,
                       .out = D});
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
  ops.linear_backward({.x = ctx,
                       .w = w.cross_attn.v.w,
                       .dy = g.vc,
                       .dx = dctx,
                       .dw = gw.cross_attn.v.w,
                       .db = gw.cross_attn.v.b,
                       .N = Nc,
                       .in = D,
                       .out = D});
  ops.layernorm_backward({.x = a.x1,
                          .w = w.norm3_w,
                          .mean = a.ln3_mean,
                          .rstd = a.ln3_rstd,
                          .dy = g.d,
                          .dx = dres,
                          .dw = gw.norm3_w,
                          .db = gw.norm3_b,
                          .N = N,
                          .C = D});
  // self-attention: x1 = x + o(attn(rope(q(xn)), rope(k(xn)), v(xn)[, offsets(xn)])) * gate1
  ops.zero(g.a, N * D);
  ops.gate_residual_backward({.y = a.o,
                              .gate = a.mod + 2 * D,
                              .dout = dres,
                              .dy = g.a,
                              .dgate = g.mod + 2 * D,
                              .B = Bt,
                              .L = Lr,
                              .C = D,
                              .stride = S6});
  ops.zero(g.b, N * D);
  ops.linear_backward({.x = a.attn,
                       .w = w.self_attn.o.w,
                       .dy = g.a,
                       .dx = g.b,
                       .dw = gw.self_attn.o.w,
                       .db = gw.self_attn.o.b,
                       .N = N,
                       .in = D,
                       .out = D});
  A *dq = g.c, *dk = g.a, *dv = g.d, *dxn = g.e;
  ops.zero(dq, N * D);
  ops.zero(dk, N * D);
  ops.zero(dv, N * D);
  ops.zero(g.off, c.attention.has_offsets() ? N * c.groups() * c.attention.slots() * 3 : 0);
  self_attention_backward(ops, c, d, index, a, g.b, dq, dk, dv, g.off);
  ops.rope_backward({.dy = dq, .dx = dq, .B = B, .F = d.f, .H = d.h, .W = d.w, .nh = nh, .d = hd});
  ops.rope_backward({.dy = dk, .dx = dk, .B = B, .F = d.f, .H = d.h, .W = d.w, .nh = nh, .d = hd});
  ops.zero(dxn, N * D);
  linear_rms_backward(ops, w.self_attn.q, w.self_attn.norm_q, a.xn, a.q_lin, a.q_rstd, dq, g.b, dxn, gw.self_attn.q,
                      gw.self_attn.norm_q, N, D);
  linear_rms_backward(ops, w.self_attn.k, w.self_attn.norm_k, a.xn, a.k_lin, a.k_rstd, dk, g.b, dxn, gw.self_attn.k,
                      gw.self_attn.norm_k, N, D);
  ops.linear_backward({.x = a.xn,
                       .w = w.self_attn.v.w,
                       .dy = dv,
                       .dx = dxn,
                       .dw = gw.self_attn.v.w,
                       .db = gw.self_attn.v.b,
                       .N = N,
                       .in = D,
                       .out = D});
  if (c.attention.has_offsets()) offset_net_backward(ops, c, d, w, a, g.off, dq, dk, dxn, gw);  // dq, dk are free
  ops.norm_modulate_backward({.x = x,
                              .scale = a.mod + D,
                              .ln = a.ln1,
                              .mean = a.ln1_mean,
                              .rstd = a.ln1_rstd,
                              .dy = dxn,
                              .tmp = g.b,
                              .dx = dres,
                              .dshift = g.mod,
                              .dscale = g.mod + D,
                              .B = Bt,
                              .L = Lr,
                              .C = D,
                              .stride = S6});
  // modulation + e0: the parameter is shared by the batch
  ops.modulation_backward(
      {.dmod = g.mod, .dparam = gw.modulation, .de = de0, .B = Bt, .K = 6, .C = D, .per_chunk = true});
}

}  // namespace ms::block_impl
