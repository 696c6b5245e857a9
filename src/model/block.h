// One Wan2.1 attention block (WanAttentionBlock): modulated self-attention with RMS-normed q, k and
// 3D RoPE, affine-normed cross-attention to the text context, modulated GELU FFN, gated residuals.
// The self-attention core is chosen by attention.type (docs/attention.md): dense, window (shifted on odd blocks), dsa
// (with its offset network on the modulated input) or dsa_fixed.
// Backward recomputes the forward from the block's saved input (activation checkpointing).
#pragma once
#include <cstdint>

#include "model/dims.h"
#include "model/weights.h"
#include "model/workspace.h"

namespace ms {

// Everything block_backward needs from the forward (N = B*L tokens, D = dim, Fd = ffn_dim, Lt = text_len,
// M = G*P*3 DSA offsets per token). A is the activations' element type, S the statistics' (norm moments,
// log-sum-exps, the modulation): T and T on the CPU, bf16 (uint16_t) and float on the GPU. The dsa buffers are
// sized only for attention.type dsa; ln1 and ln2 only where the backend does not fuse the norm with the
// modulation (Ops::kFusedNormModulate).
template <class A, class S = A>
struct BlockActs {
  S* mod;                  // [Bt, 6, D] modulation + e0: shift1, scale1, gate1, shift2, scale2, gate2
  S *ln1_mean, *ln1_rstd;  // [N], [N]
  A* ln1;                  // [N, D] normalised input
  A* xn;                   // [N, D] modulated: input of q, k, v
  A *q_lin, *q;            // [N, D], [N, D] (normed + roped)
  S* q_rstd;               // [N]
  A *k_lin, *k;            // same for k
  S* k_rstd;               //
  A* v;                    // [N, D]
  A *off_h, *off_g;        // dsa: [N, D] offset_conv output, GELU of it
  A *off_raw, *offsets;    // dsa: [N, M] offset_proj output, range * tanh of it
  A* attn;                 // [N, D] attention output
  S* attn_lse;             // [B, nh, L]
  A* o;                    // [N, D] self_attn.o output (before the gate)
  A* x1;                   // [N, D] after the self-attention residual
  S *ln3_mean, *ln3_rstd;  // [N], [N]
  A* xc;                   // [N, D] norm3 output
  A *qc_lin, *qc;          // [N, D], [N, D]
  S* qc_rstd;              // [N]
  A *kc_lin, *kc, *vc;     // [B*Lt, D]
  S* kc_rstd;              // [B*Lt]
  A* yc;                   // [N, D]
  S* yc_lse;               // [B, nh, L]
  A* x2;                   // [N, D] after the cross-attention residual
  S *ln2_mean, *ln2_rstd;  // [N], [N]
  A* ln2;                  // [N, D]
  A* xf;                   // [N, D] modulated FFN input
  A *ffn_h, *ffn_g;        // [N, Fd] pre-activation, GELU output
  A* ffn_out;              // [N, D] ffn.2 output (before the gate)
};

// Scratch gradients for block_backward.
template <class A, class S = A>
struct BlockGrads {
  A *a, *b, *c, *d, *e;  // [N, D]
  A *f1, *f2;            // [N, Fd]
  A *kc, *vc, *kl;       // [B*Lt, D]
  S* mod;                // [Bt, 6, D]
  A* off;                // dsa: [N, M] offset gradients
};

// f(numel, field) for every buffer of BlockActs; fused: no ln1, ln2 (sized 0).
template <class A, class S, class F>
void visit_block_acts(const ModelConfig& c, const ModelDims& d, BlockActs<A, S>& a, F&& f, bool fused = false) {
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt, H = d.B * c.num_heads * d.L;
  const int64_t No = c.attention.has_offsets() ? N : 0, M = c.groups() * c.attention.slots() * 3;
  f(d.Bt() * 6 * D, a.mod);
  for (S** p :
       {&a.ln1_mean, &a.ln1_rstd, &a.q_rstd, &a.k_rstd, &a.ln3_mean, &a.ln3_rstd, &a.qc_rstd, &a.ln2_mean, &a.ln2_rstd})
    f(N, *p);
  for (A** p : {&a.ln1, &a.xn, &a.q_lin, &a.q, &a.k_lin, &a.k, &a.v, &a.attn, &a.o, &a.x1, &a.xc, &a.qc_lin, &a.qc,
                &a.yc, &a.x2, &a.ln2, &a.xf, &a.ffn_out})
    f(fused && (p == &a.ln1 || p == &a.ln2) ? 0 : N * D, *p);
  f(Nc, a.kc_rstd);
  for (A** p : {&a.kc_lin, &a.kc, &a.vc}) f(Nc * D, *p);
  for (A** p : {&a.off_h, &a.off_g}) f(No * D, *p);
  for (A** p : {&a.off_raw, &a.offsets}) f(No * M, *p);
  f(H, a.attn_lse);
  f(H, a.yc_lse);
  f(N * c.ffn_dim, a.ffn_h);
  f(N * c.ffn_dim, a.ffn_g);
}

template <class A, class S, class F>
void visit_block_grads(const ModelConfig& c, const ModelDims& d, BlockGrads<A, S>& g, F&& f) {
  for (A** p : {&g.a, &g.b, &g.c, &g.d, &g.e}) f(d.N() * c.dim, *p);
  for (A** p : {&g.f1, &g.f2}) f(d.N() * c.ffn_dim, *p);
  for (A** p : {&g.kc, &g.vc, &g.kl}) f(d.B * d.Lt * c.dim, *p);
  f(d.Bt() * 6 * c.dim, g.mod);
  f(c.attention.has_offsets() ? d.N() * c.groups() * c.attention.slots() * 3 : 0, g.off);
}

}  // namespace ms
