#include "model/head.h"

#include <algorithm>

#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/patchify.h"

namespace ms {
namespace {
cpu::PatchDims out_dims(const ModelConfig& c, const ModelDims& d) {
  return {d.B, c.out_dim, d.F, d.H, d.W, c.patch_size[0], c.patch_size[1], c.patch_size[2]};
}
}  // namespace

template <class T>
void head_forward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const T* e,
                  const HeadActs<T>& a, T* out) {
  const int64_t N = d.N(), D = c.dim, Po = c.out_dim * c.patch_volume();
  cpu::modulation_forward(w.modulation, e, a.hm, d.B, 2, D, false);
  cpu::layernorm_forward<T>(x, nullptr, nullptr, a.ln, a.mean, a.rstd, N, D, c.eps);
  cpu::modulate_forward(a.ln, a.hm, a.hm + D, a.xm, d.B, d.L, D, 2 * D);
  cpu::linear_forward(a.xm, w.head.w, w.head.b, a.y, N, D, Po);
  cpu::unpatchify_forward(a.y, out, out_dims(c, d));
}

template <class T>
void head_backward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const HeadActs<T>& a,
                   const T* dout, T* dx, T* de, const HeadW<T*>& gw, T* scratch) {
  const int64_t N = d.N(), D = c.dim, Po = c.out_dim * c.patch_volume();
  T *dy = scratch, *dxm = dy + N * Po, *dln = dxm + N * D, *dhm = dln + N * D;
  cpu::unpatchify_backward(dout, dy, out_dims(c, d));
  std::fill(dxm, dxm + N * D, T(0));
  cpu::linear_backward(a.xm, w.head.w, dy, dxm, gw.head.w, gw.head.b, N, D, Po);
  std::fill(dhm, dhm + d.B * 2 * D, T(0));
  std::fill(dln, dln + N * D, T(0));
  cpu::modulate_backward(a.ln, a.hm + D, dxm, dln, dhm, dhm + D, d.B, d.L, D, 2 * D);
  std::fill(dx, dx + N * D, T(0));
  cpu::layernorm_backward<T>(x, nullptr, a.mean, a.rstd, dln, dx, nullptr, nullptr, N, D);
  cpu::modulation_backward(dhm, gw.modulation, de, d.B, 2, D, false);
}

#define MS_INSTANTIATE(T)                                                                                         \
  template void head_forward<T>(const ModelConfig&, const ModelDims&, const HeadW<const T*>&, const T*, const T*, \
                                const HeadActs<T>&, T*);                                                          \
  template void head_backward<T>(const ModelConfig&, const ModelDims&, const HeadW<const T*>&, const T*,          \
                                 const HeadActs<T>&, const T*, T*, T*, const HeadW<T*>&, T*);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms
