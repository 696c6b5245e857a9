// The CUDA kernels of ops/attention.h.
#pragma once
#include <cstdint>

#include "ops/attention.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/attention.cu), enqueued on `stream`: q, k, v, out, dout, dq, dk, dv bf16,
// lse fp32. Head dims up to 128 (every Wan2.1 model's) run the flash-style tensor-core kernels
// (backend/cuda/flash_attention.h); wider heads, up to 256, a plain kernel (one block per query row, the
// scores recomputed in each pass). Both deterministic: the backward writes dq per query row and dk, dv per
// key row, no atomics. scratch holds attention_backward_scratch(a) floats.
namespace ms::cuda {

void attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                       const AttentionDims& a, CUstream_st* stream);
void attention_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out, const float* lse,
                        const uint16_t* dout, uint16_t* dq, uint16_t* dk, uint16_t* dv, float* scratch,
                        const AttentionDims& a, CUstream_st* stream);

}  // namespace ms::cuda
