#include "model/stem.h"

#include <algorithm>

#include "ops/activation.h"
#include "ops/embedding.h"
#include "ops/linear.h"
#include "ops/patchify.h"

namespace ms {
namespace {

cpu::PatchDims patch_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, c.in_dim, d.F, d.H, d.W, c.patch_size[0], c.patch_size[1], c.patch_size[2]};
}

template <class T>
void zero(T* p, int64_t n) {
  std::fill(p, p + n, T(0));
}

}  // namespace

int64_t stem_scratch_numel(const ModelConfig& c, const ModelDims& d) {
  const int64_t Nt = d.B * d.Lt;
  return std::max({d.N() * c.in_dim * c.patch_volume(), Nt * (c.text_dim + 2 * c.dim), d.B * 3 * c.dim});
}

template <class T>
void stem_forward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const T* latents, const T* t,
                  const T* context, const StemActs<T>& a) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  cpu::patchify_forward(latents, a.patches, patch_dims(c, d));
  cpu::linear_forward(a.patches, w.patch.w, w.patch.b, a.x0, N, Pv, D);
  // time: e = time_embedding(sinusoidal(t)); e0 = time_projection(e)
  cpu::sinusoidal_embedding(t, a.sin, B, c.freq_dim);
  cpu::linear_forward(a.sin, w.time0.w, w.time0.b, a.t_a0, B, c.freq_dim, D);
  cpu::silu_forward(a.t_a0, a.t_s0, B * D);
  cpu::linear_forward(a.t_s0, w.time2.w, w.time2.b, a.e, B, D, D);
  cpu::silu_forward(a.e, a.e_silu, B * D);
  cpu::linear_forward(a.e_silu, w.time_proj.w, w.time_proj.b, a.e0, B, D, 6 * D);
  // text: ctx = text_embedding(pad(context))
  cpu::pad_context_forward(context, a.ctx_pad, B, d.Lc, d.Lt, c.text_dim);
  cpu::linear_forward(a.ctx_pad, w.text0.w, w.text0.b, a.ctx_h, Nt, c.text_dim, D);
  cpu::gelu_tanh_forward(a.ctx_h, a.ctx_g, Nt * D);
  cpu::linear_forward(a.ctx_g, w.text2.w, w.text2.b, a.ctx, Nt, D, D);
}

template <class T>
void stem_backward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const StemActs<T>& a,
                   const T* dx0, T* de, const T* de0, const T* dctx, const StemW<T*>& gw, T* dlatents, T* dcontext,
                   T* scratch) {
  const int64_t N = d.N(), D = c.dim, B = d.B, Nt = d.B * d.Lt, Pv = c.in_dim * c.patch_volume();
  // patch embedding
  T* dpatches = dlatents ? scratch : nullptr;
  if (dpatches) zero(dpatches, N * Pv);
  cpu::linear_backward(a.patches, w.patch.w, dx0, dpatches, gw.patch.w, gw.patch.b, N, Pv, D);
  if (dlatents) cpu::patchify_backward(dpatches, dlatents, patch_dims(c, d));
  // time: e0 = proj(silu(e)), e = time2(silu(time0(sin)))
  T *de_silu = scratch, *ds0 = scratch + B * D, *da0 = scratch + 2 * B * D;
  zero(de_silu, B * D);
  cpu::linear_backward(a.e_silu, w.time_proj.w, de0, de_silu, gw.time_proj.w, gw.time_proj.b, B, D, 6 * D);
  cpu::silu_backward(a.e, de_silu, de, B * D);
  zero(ds0, B * D);
  cpu::linear_backward(a.t_s0, w.time2.w, de, ds0, gw.time2.w, gw.time2.b, B, D, D);
  zero(da0, B * D);
  cpu::silu_backward(a.t_a0, ds0, da0, B * D);
  cpu::linear_backward<T>(a.sin, w.time0.w, da0, nullptr, gw.time0.w, gw.time0.b, B, c.freq_dim, D);
  // text
  T *dg = scratch, *dh = scratch + Nt * D, *dpad = scratch + 2 * Nt * D;
  zero(dg, Nt * D);
  cpu::linear_backward(a.ctx_g, w.text2.w, dctx, dg, gw.text2.w, gw.text2.b, Nt, D, D);
  zero(dh, Nt * D);
  cpu::gelu_tanh_backward(a.ctx_h, dg, dh, Nt * D);
  T* dpad_or_null = dcontext ? dpad : nullptr;
  if (dpad_or_null) zero(dpad, Nt * c.text_dim);
  cpu::linear_backward(a.ctx_pad, w.text0.w, dh, dpad_or_null, gw.text0.w, gw.text0.b, Nt, c.text_dim, D);
  if (dcontext) cpu::pad_context_backward(dpad, dcontext, B, d.Lc, d.Lt, c.text_dim);
}

#define MS_INSTANTIATE(T)                                                                                          \
  template void stem_forward<T>(const ModelConfig&, const ModelDims&, const StemW<const T*>&, const T*, const T*,  \
                                const T*, const StemActs<T>&);                                                     \
  template void stem_backward<T>(const ModelConfig&, const ModelDims&, const StemW<const T*>&, const StemActs<T>&, \
                                 const T*, T*, const T*, const T*, const StemW<T*>&, T*, T*, T*);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms
