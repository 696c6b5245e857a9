// The head's forward and backward written once over an ops policy (model/block_impl.h explains the policies):
// LayerNorm, modulation by head.modulation + e, linear, unpatchify. Io is the policy's type of the model's
// inputs and output (the velocity).
#pragma once
#include <cstdint>

#include "model/head.h"
#include "ops/patchify.h"

namespace ms::head_impl {

inline PatchDims out_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, c.out_dim, d.F, d.H, d.W, c.patch_size[0], c.patch_size[1], c.patch_size[2]};
}

// x [B, L, D], e [Bt, D] (one row per run of Lr tokens) -> out [B, out_dim, F, H, W].
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight>
void head_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const W*>& w, const A* x, const S* e,
                  const HeadActs<A, S>& a, typename Ops::Io* out) {
  const int64_t N = d.N(), D = c.dim, Po = c.out_dim * c.patch_volume();
  ops.modulation_forward({.param = w.modulation, .e = e, .mod = a.hm, .B = d.Bt(), .K = 2, .C = D});
  ops.norm_modulate_forward({.x = x,
                             .shift = a.hm,
                             .scale = a.hm + D,
                             .ln = a.ln,
                             .y = a.xm,
                             .mean = a.mean,
                             .rstd = a.rstd,
                             .B = d.Bt(),
                             .L = d.Lr(),
                             .C = D,
                             .stride = 2 * D,
                             .eps = c.eps});
  ops.linear_forward({.x = a.xm, .w = w.head.w, .b = w.head.b, .y = a.y, .N = N, .in = D, .out = Po});
  ops.unpatchify_forward({.tokens = a.y, .video = out, .d = out_dims(c, d)});
}

// Inverts head_forward from dout [B, out_dim, F, H, W]: writes dx [B, L, D] (overwritten), accumulates de [Bt, D]
// and the parameter grads. Scratch: as [N * (Po + 2 D)] activations, ss [Bt * 2 D] statistics.
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class G = typename Ops::Grad>
void head_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const W*>& w, const A* x,
                   const HeadActs<A, S>& a, const typename Ops::Io* dout, A* dx, S* de, const HeadW<G*>& gw, A* as,
                   S* ss) {
  const int64_t N = d.N(), D = c.dim, Po = c.out_dim * c.patch_volume();
  A *dy = as, *dxm = dy + N * Po, *dln = dxm + N * D;
  S* dhm = ss;
  ops.unpatchify_backward({.dvideo = dout, .dtokens = dy, .d = out_dims(c, d)});
  ops.zero(dxm, N * D);
  ops.linear_backward(
      {.x = a.xm, .w = w.head.w, .dy = dy, .dx = dxm, .dw = gw.head.w, .db = gw.head.b, .N = N, .in = D, .out = Po});
  ops.zero(dhm, d.Bt() * 2 * D);
  ops.zero(dx, N * D);
  ops.norm_modulate_backward({.x = x,
                              .scale = a.hm + D,
                              .ln = a.ln,
                              .mean = a.mean,
                              .rstd = a.rstd,
                              .dy = dxm,
                              .tmp = dln,
                              .dx = dx,
                              .dshift = dhm,
                              .dscale = dhm + D,
                              .B = d.Bt(),
                              .L = d.Lr(),
                              .C = D,
                              .stride = 2 * D});
  ops.modulation_backward({.dmod = dhm, .dparam = gw.modulation, .de = de, .B = d.Bt(), .K = 2, .C = D});
}

}  // namespace ms::head_impl
