// The stem stage: patch embedding of the latents, timestep embedding (e, e0) and text embedding of
// the zero-padded context.
#pragma once
#include <algorithm>
#include <cstdint>

#include "model/dims.h"
#include "model/weights.h"

namespace ms {

// N = B*L tokens, D = dim, Pv = in_dim*pt*ph*pw, Nt = B*Lt context rows. A: activations; S: the time path
// (statistics type: fp32 on the GPU, as Wan computes it).
template <class A, class S = A>
struct StemActs {
  A* patches;                  // [N, Pv] patchified latents
  A* x0;                       // [N, D] block-0 input
  S *sin, *t_a0, *t_s0;        // [Bt, freq_dim], [Bt, D] time_embedding.0 output, SiLU of it
  S* e;                        // [Bt, D] time embedding (Bt = B * time_rows)
  S* e_silu;                   // [Bt, D] SiLU(e): input of time_projection.1
  S* e0;                       // [Bt, 6, D] block modulation input
  A *ctx_pad, *ctx_h, *ctx_g;  // [Nt, text_dim], [Nt, D] text_embedding.0 output, GELU of it
  A* ctx;                      // [Nt, D] embedded context for cross-attention
};

template <class A, class S, class F>
void visit_stem_acts(const ModelConfig& c, const ModelDims& d, StemActs<A, S>& a, F&& f) {
  const int64_t N = d.N(), D = c.dim, Nt = d.B * d.Lt;
  f(N * c.in_dim * c.patch_volume(), a.patches);
  f(N * D, a.x0);
  f(d.Bt() * c.freq_dim, a.sin);
  for (S** p : {&a.t_a0, &a.t_s0, &a.e, &a.e_silu}) f(d.Bt() * D, *p);
  f(d.Bt() * 6 * D, a.e0);
  f(Nt * c.text_dim, a.ctx_pad);
  for (A** p : {&a.ctx_h, &a.ctx_g, &a.ctx}) f(Nt * D, *p);
}

// The scratch stem_backward takes: as activations, ss (the time path) statistics; on the CPU one buffer of their
// maximum serves as both.
inline int64_t stem_scratch_act_numel(const ModelConfig& c, const ModelDims& d) {
  return std::max(d.N() * c.in_dim * c.patch_volume(), d.B * d.Lt * (c.text_dim + 2 * c.dim));
}
inline int64_t stem_scratch_stat_numel(const ModelConfig& c, const ModelDims& d) { return d.Bt() * 3 * c.dim; }
inline int64_t stem_scratch_numel(const ModelConfig& c, const ModelDims& d) {
  return std::max(stem_scratch_act_numel(c, d), stem_scratch_stat_numel(c, d));
}

}  // namespace ms
