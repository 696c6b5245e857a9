// The stem's forward and backward written once over an ops policy (model/block_impl.h explains the policies):
// patch embedding, the timestep embedding (e, e0) on the time path (Ops::time_*), the text embedding of the
// zero-padded context. Io is the policy's type of the model's inputs.
#pragma once
#include <cstdint>

#include "model/stem.h"
#include "ops/patchify.h"

namespace ms::stem_impl {

inline PatchDims patch_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, c.in_dim, d.F, d.H, d.W, c.patch_size[0], c.patch_size[1], c.patch_size[2]};
}

// latents [B, in_dim, F, H, W], t [B] (0..1000), context [B, Lc, text_dim] -> acts (x0, e, e0, ctx).
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class Io = typename Ops::Io>
void stem_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, const StemW<const W*>& w, const Io* latents,
                  const Io* t, const Io* context, const StemActs<A, S>& a) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  ops.patchify_forward(latents, a.patches, patch_dims(c, d));
  ops.linear_forward(a.patches, w.patch.w, w.patch.b, a.x0, N, Pv, D);
  // time: e = time_embedding(sinusoidal(t)); e0 = time_projection(e)
  ops.sinusoidal_embedding(t, a.sin, B, c.freq_dim);
  ops.time_linear_forward(a.sin, w.time0.w, w.time0.b, a.t_a0, B, c.freq_dim, D);
  ops.time_silu_forward(a.t_a0, a.t_s0, B * D);
  ops.time_linear_forward(a.t_s0, w.time2.w, w.time2.b, a.e, B, D, D);
  ops.time_silu_forward(a.e, a.e_silu, B * D);
  ops.time_linear_forward(a.e_silu, w.time_proj.w, w.time_proj.b, a.e0, B, D, 6 * D);
  // text: ctx = text_embedding(pad(context))
  ops.pad_context_forward(context, a.ctx_pad, B, d.Lc, d.Lt, c.text_dim);
  ops.linear_forward(a.ctx_pad, w.text0.w, w.text0.b, a.ctx_h, Nt, c.text_dim, D);
  ops.gelu_tanh_forward(a.ctx_h, a.ctx_g, Nt * D);
  ops.linear_forward(a.ctx_g, w.text2.w, w.text2.b, a.ctx, Nt, D, D);
}

// Inverts stem_forward given dx0 [N, D], de [B, D], de0 [B, 6, D], dctx [Nt, D] (each consumed; de is clobbered).
// Accumulates parameter grads gw; writes dlatents [B, in_dim, F, H, W] and dcontext [B, Lc, text_dim] when
// non-null (overwritten). Scratch: as [stem_scratch_act_numel], ss [stem_scratch_stat_numel].
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class G = typename Ops::Grad, class Io = typename Ops::Io>
void stem_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, const StemW<const W*>& w,
                   const StemActs<A, S>& a, const A* dx0, S* de, const S* de0, const A* dctx, const StemW<G*>& gw,
                   Io* dlatents, Io* dcontext, A* as, S* ss) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  // patch embedding
  A* dpatches = dlatents ? as : nullptr;
  if (dpatches) ops.zero(dpatches, N * Pv);
  ops.linear_backward(a.patches, w.patch.w, dx0, dpatches, gw.patch.w, gw.patch.b, N, Pv, D);
  if (dlatents) ops.patchify_backward(dpatches, dlatents, patch_dims(c, d));
  // time: e0 = proj(silu(e)), e = time2(silu(time0(sin)))
  S *de_silu = ss, *ds0 = ss + B * D, *da0 = ss + 2 * B * D;
  ops.zero(de_silu, B * D);
  ops.time_linear_backward(a.e_silu, w.time_proj.w, de0, de_silu, gw.time_proj.w, gw.time_proj.b, B, D, 6 * D);
  ops.time_silu_backward(a.e, de_silu, de, B * D);
  ops.zero(ds0, B * D);
  ops.time_linear_backward(a.t_s0, w.time2.w, de, ds0, gw.time2.w, gw.time2.b, B, D, D);
  ops.zero(da0, B * D);
  ops.time_silu_backward(a.t_a0, ds0, da0, B * D);
  ops.time_linear_backward(a.sin, w.time0.w, da0, static_cast<S*>(nullptr), gw.time0.w, gw.time0.b, B, c.freq_dim, D);
  // text
  A *dg = as, *dh = as + Nt * D, *dpad = as + 2 * Nt * D;
  ops.zero(dg, Nt * D);
  ops.linear_backward(a.ctx_g, w.text2.w, dctx, dg, gw.text2.w, gw.text2.b, Nt, D, D);
  ops.zero(dh, Nt * D);
  ops.gelu_tanh_backward(a.ctx_h, dg, dh, Nt * D);
  A* dpad_or_null = dcontext ? dpad : nullptr;
  if (dpad_or_null) ops.zero(dpad, Nt * c.text_dim);
  ops.linear_backward(a.ctx_pad, w.text0.w, dh, dpad_or_null, gw.text0.w, gw.text0.b, Nt, c.text_dim, D);
  if (dcontext) ops.pad_context_backward(dpad, dcontext, B, d.Lc, d.Lt, c.text_dim);
}

}  // namespace ms::stem_impl
