// LayerNorm without affine followed by AdaLN modulation, fused (the block's norm1 / norm2 and their
// modulation): y[b,l,c] = xhat[b,l,c] * (1 + scale[b*stride + c]) + shift[b*stride + c], xhat = (x - mean) * rstd.
// The normalised tensor is never written: the backward recomputes it from x, mean and rstd, which saves a write and
// a read of [N, C] each way. Its reference is cpu::layernorm_forward (no affine) then cpu::modulate_forward, and
// their backwards in reverse order.
#pragma once
#include <cstdint>

#include "runtime/reduction_scratch.h"

struct CUstream_st;

namespace ms::cuda {

// x, y [B, L, C] bf16; shift, scale fp32 rows `stride` apart (the e0 chunks); mean, rstd [B*L] fp32.
void layernorm_modulate_forward(const uint16_t* x, const float* shift, const float* scale, uint16_t* y, float* mean,
                                float* rstd, int64_t B, int64_t L, int64_t C, int64_t stride, double eps,
                                CUstream_st* stream);
// Inverts it: dx [B, L, C] += (bf16); dshift, dscale [b*stride + c] += sum over l (fp32, through scratch
// [layernorm_modulate_backward_scratch(L, C)] in a fixed order).
void layernorm_modulate_backward(const uint16_t* x, const float* mean, const float* rstd, const float* scale,
                                 const uint16_t* dy, uint16_t* dx, float* dshift, float* dscale, float* scratch,
                                 int64_t B, int64_t L, int64_t C, int64_t stride, CUstream_st* stream);

}  // namespace ms::cuda
