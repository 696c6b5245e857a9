// The head stage: LayerNorm, modulation by head.modulation + e, linear, unpatchify.
#pragma once
#include <cstdint>

#include "model/dims.h"
#include "model/weights.h"

namespace ms {

// N = B*L, D = dim, Po = out_dim*pt*ph*pw. A: activations, S: statistics and the modulation (block.h).
template <class A, class S = A>
struct HeadActs {
  S *mean, *rstd;  // [N], [N]
  A* ln;           // [N, D] normalised input (not allocated where the backend fuses norm and modulation)
  S* hm;           // [Bt, 2, D] head.modulation + e: shift, scale
  A* xm;           // [N, D] modulated
  A* y;            // [N, Po] linear output (tokens, before unpatchify)
};

template <class A, class S, class F>
void visit_head_acts(const ModelConfig& c, const ModelDims& d, HeadActs<A, S>& a, F&& f, bool fused = false) {
  f(d.N(), a.mean);
  f(d.N(), a.rstd);
  f(fused ? 0 : d.N() * c.dim, a.ln);
  f(d.Bt() * 2 * c.dim, a.hm);
  f(d.N() * c.dim, a.xm);
  f(d.N() * c.out_dim * c.patch_volume(), a.y);
}

// The scratch head_backward takes: as activations, ss statistics (the modulation's); on the CPU one buffer of
// their sum.
inline int64_t head_scratch_act_numel(const ModelConfig& c, const ModelDims& d) {
  return d.N() * (c.out_dim * c.patch_volume() + 2 * c.dim);
}
inline int64_t head_scratch_stat_numel(const ModelConfig& c, const ModelDims& d) { return d.Bt() * 2 * c.dim; }
inline int64_t head_scratch_numel(const ModelConfig& c, const ModelDims& d) {
  return head_scratch_act_numel(c, d) + head_scratch_stat_numel(c, d);
}

}  // namespace ms
