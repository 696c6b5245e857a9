// The model's stages on the GPU: model/block_impl.h, stem_impl.h and head_impl.h instantiated with CudaOps, the
// same orchestration as on the CPU. bf16 weights and activations; fp32 statistics, the time path (e, e0, de,
// de0), weight gradients, and the model's inputs and velocity; dense self-attention only until the local
// attention kernels land (issue 6). Everything is enqueued on ops.stream.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_ops.h"
#include "model/block.h"
#include "model/head.h"
#include "model/stem.h"

namespace ms::cuda {

using GpuBlockActs = BlockActs<uint16_t, float>;
using GpuBlockGrads = BlockGrads<uint16_t, float>;
using GpuStemActs = StemActs<uint16_t, float>;
using GpuHeadActs = HeadActs<uint16_t, float>;

// stem_forward of model/stem.h: latents [B, in_dim, F, H, W], t [B], context [B, Lc, text_dim] fp32 -> acts.
void stem_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const StemW<const uint16_t*>& w,
                  const float* latents, const float* t, const float* context, const GpuStemActs& a);

// stem_backward of model/stem.h; scratch as [stem_scratch_act_numel] bf16, ss [stem_scratch_stat_numel] fp32.
void stem_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const StemW<const uint16_t*>& w,
                   const GpuStemActs& a, const uint16_t* dx0, float* de, const float* de0, const uint16_t* dctx,
                   const StemW<float*>& gw, float* dlatents, float* dcontext, uint16_t* as, float* ss);

// head_forward of model/head.h: x [B, L, D], e [B, D] fp32 -> out [B, out_dim, F, H, W] fp32; acts laid out by
// visit_head_acts with fused = true.
void head_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const uint16_t*>& w,
                  const uint16_t* x, const float* e, const GpuHeadActs& a, float* out);

// head_backward of model/head.h; scratch as [N * (Po + 2 D)] bf16, ss [B * 2 D] fp32.
void head_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, const HeadW<const uint16_t*>& w,
                   const uint16_t* x, const GpuHeadActs& a, const float* dout, uint16_t* dx, float* de,
                   const HeadW<float*>& gw, uint16_t* as, float* ss);

// block_forward of model/block.h: x [B, L, D], e0 [B, 6, D] fp32, ctx [B, Lt, D] -> out [B, L, D]; fills acts
// (laid out by visit_block_acts with fused = true).
void block_forward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, int64_t index,
                   const BlockW<const uint16_t*>& w, const uint16_t* x, const float* e0, const uint16_t* ctx,
                   const GpuBlockActs& a, uint16_t* out);

// block_backward of model/block.h: dx [B, L, D] written (may alias dout); de0, dctx and gw accumulated.
void block_backward(CudaOps& ops, const ModelConfig& c, const ModelDims& d, int64_t index,
                    const BlockW<const uint16_t*>& w, const uint16_t* x, const float* e0, const uint16_t* ctx,
                    const GpuBlockActs& a, const GpuBlockGrads& g, const uint16_t* dout, uint16_t* dx, float* de0,
                    uint16_t* dctx, const BlockW<float*>& gw);

}  // namespace ms::cuda
