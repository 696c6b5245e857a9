#include "backend/cuda/cuda_block.h"

#include "model/block_impl.h"

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

}  // namespace ms::cuda
