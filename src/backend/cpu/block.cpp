#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_stages.h"
#include "model/block_impl.h"

namespace ms {

template <class T>
void block_forward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                   const T* e0, const T* ctx, const BlockActs<T>& a, T* out) {
  CpuOps<T> ops;
  block_impl::block_forward(ops, c, d, index, w, x, e0, ctx, a, out);
}

template <class T>
void block_backward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                    const T* e0, const T* ctx, const BlockActs<T>& a, const BlockGrads<T>& g, const T* dout, T* dx,
                    T* de0, T* dctx, const BlockW<T*>& gw, bool recompute) {
  CpuOps<T> ops;
  block_impl::block_backward(ops, c, d, index, w, x, e0, ctx, a, g, dout, dx, de0, dctx, gw, recompute);
}

#define MS_INSTANTIATE(T)                                                                                              \
  template void block_forward<T>(const ModelConfig&, const ModelDims&, int64_t, const BlockW<const T*>&, const T*,     \
                                 const T*, const T*, const BlockActs<T>&, T*);                                         \
  template void block_backward<T>(const ModelConfig&, const ModelDims&, int64_t, const BlockW<const T*>&, const T*,    \
                                  const T*, const T*, const BlockActs<T>&, const BlockGrads<T>&, const T*, T*, T*, T*, \
                                  const BlockW<T*>&, bool);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms
