// The CUDA kernels of ops/attention.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/attention.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/attention.cu), enqueued on `stream`: q, k, v, out, dout, dq, dk, dv bf16,
// lse fp32. Head dims up to 128 (every Wan2.1 model's) run the flash-style tensor-core kernels
// (backend/cuda/flash_attention.h); wider heads, up to 256, a plain kernel (one block per query row, the
// scores recomputed in each pass). Both deterministic: the backward writes dq per query row and dk, dv per
// key row, no atomics. The backward's scratch holds attention_backward_scratch(dims) floats.
namespace ms::cuda {

void attention_forward(const AttentionParams<uint16_t, float>& p, const Launch& l);
void attention_backward(const AttentionParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
