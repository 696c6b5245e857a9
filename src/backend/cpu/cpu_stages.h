// The model's stages on the CPU: model/stem_impl.h, block_impl.h and head_impl.h instantiated with CpuOps<T>
// (backend/cpu/cpu_ops.h) for float and double. The reference the CUDA stages are tested against, the CPU stage
// runner's stages and ResidentModel's.
#pragma once
#include <cstdint>

#include "model/block.h"
#include "model/head.h"
#include "model/stem.h"

namespace ms {

// latents [B, in_dim, F, H, W], t [B] (0..1000), context [B, Lc, text_dim] -> acts (x0, e, e0, ctx).
template <class T>
void stem_forward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const T* latents, const T* t,
                  const T* context, const StemActs<T>& a);

// Inverts stem_forward given dx0 [N, D], de [B, D], de0 [B, 6, D], dctx [Nt, D] (each consumed; de is
// clobbered). Accumulates parameter grads gw; writes dlatents [B, in_dim, F, H, W] and dcontext
// [B, Lc, text_dim] when non-null (overwritten). `scratch` holds max(N*Pv, Nt*(text_dim+2D), B*3D) elements.
template <class T>
void stem_backward(const ModelConfig& c, const ModelDims& d, const StemW<const T*>& w, const StemActs<T>& a,
                   const T* dx0, T* de, const T* de0, const T* dctx, const StemW<T*>& gw, T* dlatents, T* dcontext,
                   T* scratch);

// Block `index` (its parity decides the window shift): x [B, L, D], e0 [B, 6, D], ctx [B, Lt, D] -> out [B, L, D];
// fills acts.
template <class T>
void block_forward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                   const T* e0, const T* ctx, const BlockActs<T>& a, T* out);

// Inverts block_forward: recomputes it from x into acts (unless !recompute: acts then hold this block's forward),
// then from dout [B, L, D] writes dx [B, L, D] (overwritten; may alias dout) and accumulates de0 [B, 6, D],
// dctx [B, Lt, D] and the parameter grads gw.
template <class T>
void block_backward(const ModelConfig& c, const ModelDims& d, int64_t index, const BlockW<const T*>& w, const T* x,
                    const T* e0, const T* ctx, const BlockActs<T>& a, const BlockGrads<T>& g, const T* dout, T* dx,
                    T* de0, T* dctx, const BlockW<T*>& gw, bool recompute = true);

// x [B, L, D], e [B, D] -> out [B, out_dim, F, H, W].
template <class T>
void head_forward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const T* e,
                  const HeadActs<T>& a, T* out);

// Inverts head_forward from dout [B, out_dim, F, H, W]: writes dx [B, L, D] (overwritten), accumulates
// de [B, D] and the parameter grads. `scratch` holds N*(Po + 2*D) + B*2*D elements.
template <class T>
void head_backward(const ModelConfig& c, const ModelDims& d, const HeadW<const T*>& w, const T* x, const HeadActs<T>& a,
                   const T* dout, T* dx, T* de, const HeadW<T*>& gw, T* scratch);

}  // namespace ms
