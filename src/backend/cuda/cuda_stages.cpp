#include "backend/cuda/cuda_stages.h"

#include "model/block_impl.h"
#include "model/head_impl.h"
#include "model/stem_impl.h"

namespace ms::cuda {

void block_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, int64_t index,
                   const BlockW<const uint16_t*>& w, const uint16_t* x, const float* e0, const uint16_t* ctx,
                   const GpuBlockActs& a, uint16_t* out) {
  block_impl::block_forward(ops, c, d, index, w, x, e0, ctx, a, out);
}

void block_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, int64_t index,
                    const BlockW<const uint16_t*>& w, const uint16_t* x, const float* e0, const uint16_t* ctx,
                    const GpuBlockActs& a, const GpuBlockGrads& g, const uint16_t* dout, uint16_t* dx, float* de0,
                    uint16_t* dctx, const BlockW<float*>& gw) {
  block_impl::block_backward(ops, c, d, index, w, x, e0, ctx, a, g, dout, dx, de0, dctx, gw);
}

void stem_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const StemW<const uint16_t*>& w,
                  const float* latents, const float* t, const float* context, const GpuStemActs& a) {
  stem_impl::stem_forward(ops, c, d, w, latents, t, context, a);
}

void stem_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const StemW<const uint16_t*>& w,
                   const GpuStemActs& a, const uint16_t* dx0, float* de, const float* de0, const uint16_t* dctx,
                   const StemW<float*>& gw, float* dlatents, float* dcontext, uint16_t* as, float* ss) {
  stem_impl::stem_backward(ops, c, d, w, a, dx0, de, de0, dctx, gw, dlatents, dcontext, as, ss);
}

void head_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const uint16_t*>& w,
                  const uint16_t* x, const float* e, const GpuHeadActs& a, float* out) {
  head_impl::head_forward(ops, c, d, w, x, e, a, out);
}

void head_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const uint16_t*>& w,
                   const uint16_t* x, const GpuHeadActs& a, const float* dout, uint16_t* dx, float* de,
                   const HeadW<float*>& gw, uint16_t* as, float* ss) {
  head_impl::head_backward(ops, c, d, w, x, a, dout, dx, de, gw, as, ss);
}

}  // namespace ms::cuda
