#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_stages.h"
#include "model/head_impl.h"

namespace ms {

template <class T>
void head_forward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const T* e,
                  const HeadActs<T>& a, T* out) {
  CpuOps<T> ops;
  head_impl::head_forward(ops, c, d, w, x, e, a, out);
}

template <class T>
void head_backward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const HeadActs<T>& a,
                   const T* dout, T* dx, T* de, const HeadW<T*>& gw, T* scratch) {
  CpuOps<T> ops;
  const int64_t N = d.N(), D = c.dim, Po = c.out_dim * c.patch_volume();
  head_impl::head_backward(ops, c, d, w, x, a, dout, dx, de, gw, scratch, scratch + N * (Po + 2 * D));
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
