// One Wan2.1 block on the GPU: model/block_impl.h instantiated with CudaOps, the same orchestration as the CPU
// block. bf16 weights and activations, fp32 statistics, modulation (e0, de0) and weight gradients; dense
// self-attention only until the local attention kernels land (issue 6). Everything is enqueued on ops.stream.
#pragma once
#include <cstdint>

#include "backend/cuda/cuda_ops.h"
#include "model/block.h"

namespace ms::cuda {

using GpuBlockActs = BlockActs<uint16_t, float>;
using GpuBlockGrads = BlockGrads<uint16_t, float>;

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
