// Flash-style attention on tensor cores (backend/cuda/flash_attention.cu), behind cuda::attention_forward and
// attention_backward (ops/attention.h) for head dims up to kFlashMaxHeadDim. Tiles of 64 queries by 64 keys: the
// scores of one tile pair live in shared memory only (O(L) memory), the softmax runs online (running max and
// sum per query row), lse is saved for the backward. bf16 operands through WMMA (16x16x16, fp32 accumulation);
// the probabilities and their gradients are rounded to bf16 before their products, as in FlashAttention-2.
// The backward is two kernels without atomics, so it is deterministic: one per key tile (dk, dv), one per query
// tile (dq), each recomputing the tile's scores.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/attention.h"

namespace ms::cuda {

constexpr int64_t kFlashMaxHeadDim = 128;

// q [B, Lq, nh, d], k, v [B, Lk, nh, d] bf16 -> out [B, Lq, nh, d] bf16, lse [B, nh, Lq] fp32.
void flash_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                             const AttentionDims& a, Stream stream);
// dq, dk, dv += the gradients, from lse and delta [B, nh, Lq] = rowsum(dout * out) (fp32).
void flash_attention_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse,
                              const uint16_t* dout, const float* delta, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                              const AttentionDims& a, Stream stream);

}  // namespace ms::cuda
