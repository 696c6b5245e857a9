// LayerNorm without affine followed by AdaLN modulation, fused (the block's norm1 / norm2 and their
// modulation): y[b,l,c] = xhat[b,l,c] * (1 + scale[b*stride + c]) + shift[b*stride + c], xhat = (x - mean) * rstd.
// The normalised tensor is never written: the backward recomputes it from x, mean and rstd, which saves a write and
// a read of [N, C] each way. Its reference is cpu::layernorm_forward (no affine) then cpu::modulate_forward, and
// their backwards in reverse order.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/modulate.h"
#include "runtime/reduction_scratch.h"

namespace ms::cuda {

// x, y [B, L, C] bf16; shift, scale fp32 rows `stride` apart (the e0 chunks); mean, rstd [B*L] fp32.
void layernorm_modulate_forward(const NormModulateParams<uint16_t, float>& p, Stream stream);
// Inverts it: dx [B, L, C] += (bf16); dshift, dscale [b*stride + c] += sum over l (fp32, through scratch
// [layernorm_modulate_backward_scratch(L, C)] in a fixed order).
void layernorm_modulate_backward(const NormModulateParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
