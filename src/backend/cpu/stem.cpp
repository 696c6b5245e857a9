#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_stages.h"
#include "model/stem_impl.h"

namespace ms {

template <class T>
void stem_forward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const T* latents, const T* t,
                  const T* context, const StemActs<T>& a) {
  CpuOps<T> ops;
  stem_impl::stem_forward(ops, c, d, w, latents, t, context, a);
}

template <class T>
void stem_backward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const StemActs<T>& a,
                   const T* dx0, T* de, const T* de0, const T* dctx, const StemW<T*>& gw, T* dlatents, T* dcontext,
                   T* scratch) {
  CpuOps<T> ops;
  stem_impl::stem_backward(ops, c, d, w, a, dx0, de, de0, dctx, gw, dlatents, dcontext, scratch, scratch);
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
