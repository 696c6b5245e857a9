// One Wan2.1 attention block (WanAttentionBlock): modulated self-attention with RMS-normed q, k and
// 3D RoPE, affine-normed cross-attention to the text context, modulated GELU FFN, gated residuals.
// The self-attention core is chosen by attention.type (DESIGN §4): dense, window (shifted on odd blocks), dsa
// (with its offset network on the modulated input) or dsa_fixed.
// Backward recomputes the forward from the block's saved input (activation checkpointing).
#pragma once
#include <cstdint>

#include "model/dims.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace ms {

// Everything block_backward needs from the forward (N = B*L tokens, D = dim, Fd = ffn_dim, Lt = text_len,
// M = G*P*3 DSA offsets per token). The dsa buffers are sized only for attention.type dsa.
template <class T>
struct BlockActs {
  T *mod;                          // [B, 6, D] modulation + e0: shift1, scale1, gate1, shift2, scale2, gate2
  T *ln1_mean, *ln1_rstd, *ln1;    // [N], [N], [N, D] normalised input
  T *xn;                           // [N, D] modulated: input of q, k, v
  T *q_lin, *q_rstd, *q;           // [N, D], [N], [N, D] (normed + roped)
  T *k_lin, *k_rstd, *k;           // same for k
  T *v;                            // [N, D]
  T *off_h, *off_g;                // dsa: [N, D] offset_conv output, GELU of it
  T *off_raw, *offsets;            // dsa: [N, M] offset_proj output, range * tanh of it
  T *attn, *attn_lse;              // [N, D] attention output, [B, nh, L]
  T *o;                            // [N, D] self_attn.o output (before the gate)
  T *x1;                           // [N, D] after the self-attention residual
  T *ln3_mean, *ln3_rstd, *xc;     // [N], [N], [N, D] norm3 output
  T *qc_lin, *qc_rstd, *qc;        // [N, D], [N], [N, D]
  T *kc_lin, *kc_rstd, *kc, *vc;   // [B*Lt, D], [B*Lt], [B*Lt, D], [B*Lt, D]
  T *yc, *yc_lse;                  // [N, D], [B, nh, L]
  T *x2;                           // [N, D] after the cross-attention residual
  T *ln2_mean, *ln2_rstd, *ln2;    // [N], [N], [N, D]
  T *xf;                           // [N, D] modulated FFN input
  T *ffn_h, *ffn_g;                // [N, Fd] pre-activation, GELU output
  T *ffn_out;                      // [N, D] ffn.2 output (before the gate)
};

// Scratch gradients for block_backward.
template <class T>
struct BlockGrads {
  T *a, *b, *c, *d, *e;  // [N, D]
  T *f1, *f2;            // [N, Fd]
  T *kc, *vc, *kl;       // [B*Lt, D]
  T *mod;                // [B, 6, D]
  T* off;                // dsa: [N, M] offset gradients
};

template <class T, class F>
void visit_block_acts(const ModelConfig& c, const ModelDims& d, BlockActs<T>& a, F&& f) {
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt, S = d.B * c.num_heads * d.L;
  const int64_t No = c.attention.has_offsets() ? N : 0, M = c.groups() * c.attention.slots() * 3;
  f(d.B * 6 * D, a.mod);
  for (T** p : {&a.ln1_mean, &a.ln1_rstd, &a.q_rstd, &a.k_rstd, &a.ln3_mean, &a.ln3_rstd, &a.qc_rstd, &a.ln2_mean,
                &a.ln2_rstd})
    f(N, *p);
  for (T** p : {&a.ln1, &a.xn, &a.q_lin, &a.q, &a.k_lin, &a.k, &a.v, &a.attn, &a.o, &a.x1, &a.xc, &a.qc_lin, &a.qc,
                &a.yc, &a.x2, &a.ln2, &a.xf, &a.ffn_out})
    f(N * D, *p);
  f(Nc, a.kc_rstd);
  for (T** p : {&a.kc_lin, &a.kc, &a.vc}) f(Nc * D, *p);
  for (T** p : {&a.off_h, &a.off_g}) f(No * D, *p);
  for (T** p : {&a.off_raw, &a.offsets}) f(No * M, *p);
  f(S, a.attn_lse);
  f(S, a.yc_lse);
  f(N * c.ffn_dim, a.ffn_h);
  f(N * c.ffn_dim, a.ffn_g);
}

template <class T, class F>
void visit_block_grads(const ModelConfig& c, const ModelDims& d, BlockGrads<T>& g, F&& f) {
  for (T** p : {&g.a, &g.b, &g.c, &g.d, &g.e}) f(d.N() * c.dim, *p);
  for (T** p : {&g.f1, &g.f2}) f(d.N() * c.ffn_dim, *p);
  for (T** p : {&g.kc, &g.vc, &g.kl}) f(d.B * d.Lt * c.dim, *p);
  f(d.B * 6 * c.dim, g.mod);
  f(c.attention.has_offsets() ? d.N() * c.groups() * c.attention.slots() * 3 : 0, g.off);
}

// Block `index` (its parity decides the window shift): x [B, L, D], e0 [B, 6, D], ctx [B, Lt, D] -> out [B, L, D];
// fills acts.
template <class T>
void block_forward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                   const T* e0, const T* ctx, const BlockActs<T>& a, T* out);

// Inverts block_forward: recomputes it from x into acts, then from dout [B, L, D] writes dx [B, L, D]
// (overwritten; may alias dout) and accumulates de0 [B, 6, D], dctx [B, Lt, D] and the parameter grads gw.
template <class T>
void block_backward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                    const T* e0, const T* ctx, const BlockActs<T>& a, const BlockGrads<T>& g, const T* dout, T* dx,
                    T* de0, T* dctx, const BlockW<T*>& gw);

}  // namespace ms
