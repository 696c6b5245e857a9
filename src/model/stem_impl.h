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

// latents [B, in_dim, F, H, W], t [Bt] (0..1000; d.time_rows per sample), context [B, Lc, text_dim] -> acts (x0, e,
// e0, ctx).
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class Io = typename Ops::Io>
void stem_forward(Ops& ops, const ModelConfig& c, const ModelDims& d, const StemW<const W*>& w, const Io* latents,
                  const Io* t, const Io* context, const StemActs<A, S>& a) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Bt = d.Bt(), Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  ops.patchify_forward({.latents = latents, .patches = a.patches, .d = patch_dims(c, d)});
  ops.linear_forward({.x = a.patches, .w = w.patch.w, .b = w.patch.b, .y = a.x0, .N = N, .in = Pv, .out = D});
  // time: e = time_embedding(sinusoidal(t)); e0 = time_projection(e)
  ops.sinusoidal_embedding({.t = t, .out = a.sin, .B = Bt, .dim = c.freq_dim});
  ops.time_linear_forward(
      {.x = a.sin, .w = w.time0.w, .b = w.time0.b, .y = a.t_a0, .N = Bt, .in = c.freq_dim, .out = D});
  ops.time_silu_forward({.x = a.t_a0, .y = a.t_s0, .n = Bt * D});
  ops.time_linear_forward({.x = a.t_s0, .w = w.time2.w, .b = w.time2.b, .y = a.e, .N = Bt, .in = D, .out = D});
  ops.time_silu_forward({.x = a.e, .y = a.e_silu, .n = Bt * D});
  ops.time_linear_forward(
      {.x = a.e_silu, .w = w.time_proj.w, .b = w.time_proj.b, .y = a.e0, .N = Bt, .in = D, .out = 6 * D});
  // text: ctx = text_embedding(pad(context))
  ops.pad_context_forward({.context = context, .padded = a.ctx_pad, .B = B, .Lc = d.Lc, .Lt = d.Lt, .C = c.text_dim});
  ops.linear_forward(
      {.x = a.ctx_pad, .w = w.text0.w, .b = w.text0.b, .y = a.ctx_h, .N = Nt, .in = c.text_dim, .out = D});
  ops.gelu_tanh_forward({.x = a.ctx_h, .y = a.ctx_g, .n = Nt * D});
  ops.linear_forward({.x = a.ctx_g, .w = w.text2.w, .b = w.text2.b, .y = a.ctx, .N = Nt, .in = D, .out = D});
}

// Inverts stem_forward given dx0 [N, D], de [Bt, D], de0 [Bt, 6, D], dctx [Nt, D] (each consumed; de is clobbered).
// Accumulates parameter grads gw; writes dlatents [B, in_dim, F, H, W] and dcontext [B, Lc, text_dim] when
// non-null (overwritten). Scratch: as [stem_scratch_act_numel], ss [stem_scratch_stat_numel].
template <class Ops, class A = typename Ops::Act, class S = typename Ops::Stat, class W = typename Ops::Weight,
          class G = typename Ops::Grad, class Io = typename Ops::Io>
void stem_backward(Ops& ops, const ModelConfig& c, const ModelDims& d, const StemW<const W*>& w,
                   const StemActs<A, S>& a, const A* dx0, S* de, const S* de0, const A* dctx, const StemW<G*>& gw,
                   Io* dlatents, Io* dcontext, A* as, S* ss) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Bt = d.Bt(), Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  // patch embedding
  A* dpatches = dlatents ? as : nullptr;
  if (dpatches) ops.zero(dpatches, N * Pv);
  ops.linear_backward({.x = a.patches,
                       .w = w.patch.w,
                       .dy = dx0,
                       .dx = dpatches,
                       .dw = gw.patch.w,
                       .db = gw.patch.b,
                       .N = N,
                       .in = Pv,
                       .out = D});
  if (dlatents) ops.patchify_backward({.dpatches = dpatches, .dlatents = dlatents, .d = patch_dims(c, d)});
  // time: e0 = proj(silu(e)), e = time2(silu(time0(sin)))
  S *de_silu = ss, *ds0 = ss + Bt * D, *da0 = ss + 2 * Bt * D;
  ops.zero(de_silu, Bt * D);
  ops.time_linear_backward({.x = a.e_silu,
                            .w = w.time_proj.w,
                            .dy = de0,
                            .dx = de_silu,
                            .dw = gw.time_proj.w,
                            .db = gw.time_proj.b,
                            .N = Bt,
                            .in = D,
                            .out = 6 * D});
  ops.time_silu_backward({.x = a.e, .dy = de_silu, .dx = de, .n = Bt * D});
  ops.zero(ds0, Bt * D);
  ops.time_linear_backward({.x = a.t_s0,
                            .w = w.time2.w,
                            .dy = de,
                            .dx = ds0,
                            .dw = gw.time2.w,
                            .db = gw.time2.b,
                            .N = Bt,
                            .in = D,
                            .out = D});
  ops.zero(da0, Bt * D);
  ops.time_silu_backward({.x = a.t_a0, .dy = ds0, .dx = da0, .n = Bt * D});
  ops.time_linear_backward(
      {.x = a.sin, .w = w.time0.w, .dy = da0, .dw = gw.time0.w, .db = gw.time0.b, .N = Bt, .in = c.freq_dim, .out = D});
  // text
  A *dg = as, *dh = as + Nt * D, *dpad = as + 2 * Nt * D;
  ops.zero(dg, Nt * D);
  ops.linear_backward({.x = a.ctx_g,
                       .w = w.text2.w,
                       .dy = dctx,
                       .dx = dg,
                       .dw = gw.text2.w,
                       .db = gw.text2.b,
                       .N = Nt,
                       .in = D,
                       .out = D});
  ops.zero(dh, Nt * D);
  ops.gelu_tanh_backward({.x = a.ctx_h, .dy = dg, .dx = dh, .n = Nt * D});
  A* dpad_or_null = dcontext ? dpad : nullptr;
  if (dpad_or_null) ops.zero(dpad, Nt * c.text_dim);
  ops.linear_backward({.x = a.ctx_pad,
                       .w = w.text0.w,
                       .dy = dh,
                       .dx = dpad_or_null,
                       .dw = gw.text0.w,
                       .db = gw.text0.b,
                       .N = Nt,
                       .in = c.text_dim,
                       .out = D});
  if (dcontext)
    ops.pad_context_backward({.dpadded = dpad, .dcontext = dcontext, .B = B, .Lc = d.Lc, .Lt = d.Lt, .C = c.text_dim});
}

}  // namespace ms::stem_impl
