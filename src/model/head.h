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
  S* hm;           // [B, 2, D] head.modulation + e: shift, scale
  A* xm;           // [N, D] modulated
  A* y;            // [N, Po] linear output (tokens, before unpatchify)
};

template <class A, class S, class F>
void visit_head_acts(const ModelConfig& c, const ModelDims& d, HeadActs<A, S>& a, F&& f, bool fused = false) {
  f(d.N(), a.mean);
  f(d.N(), a.rstd);
  f(fused ? 0 : d.N() * c.dim, a.ln);
  f(d.B * 2 * c.dim, a.hm);
  f(d.N() * c.dim, a.xm);
  f(d.N() * c.out_dim * c.patch_volume(), a.y);
}

// x [B, L, D], e [B, D] -> out [B, out_dim, F, H, W].
template <class T>
void head_forward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const T* e,
                  const HeadActs<T>& a, T* out);

// Inverts head_forward from dout [B, out_dim, F, H, W]: writes dx [B, L, D] (overwritten), accumulates
// de [B, D] and the parameter grads. `scratch` holds N*(Po + 2*D) + B*2*D elements.
template <class T>
void head_backward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const HeadActs<T>& a,
                   const T* dout, T* dx, T* de, const HeadW<T*>& gw, T* scratch);

// The scratch head_backward takes: as activations, ss statistics (the modulation's); on the CPU one buffer of
// their sum.
inline int64_t head_scratch_act_numel(const ModelConfig& c, const ModelDims& d) {
  return d.N() * (c.out_dim * c.patch_volume() + 2 * c.dim);
}
inline int64_t head_scratch_stat_numel(const ModelConfig& c, const ModelDims& d) { return d.B * 2 * c.dim; }
inline int64_t head_scratch_numel(const ModelConfig& c, const ModelDims& d) {
  return head_scratch_act_numel(c, d) + head_scratch_stat_numel(c, d);
}

}  // namespace ms
