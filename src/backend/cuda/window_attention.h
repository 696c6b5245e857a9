// The CUDA kernels of ops/window_attention.h.
#pragma once
#include <array>
#include <cstdint>

#include "ops/window_attention.h"

struct CUstream_st;

// The CUDA version (backend/cuda/window_attention.cu), enqueued on `stream`: the flash-style kernels with each
// cell a group of rows (backend/cuda/flash_attention.h); q, k, v, out, dout, dq, dk, dv bf16, lse fp32, head dims up
// to 128. scratch holds attention_backward_scratch({B, L, L, nh, d}) floats (runtime/reduction_scratch.h).
// Deterministic.
namespace ms::cuda {

void window_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                              const VideoAttentionDims& dims, const std::array<int64_t, 3>& window, bool shifted,
                              CUstream_st* stream);
void window_attention_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                               const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                               float* scratch, const VideoAttentionDims& dims, const std::array<int64_t, 3>& window,
                               bool shifted, CUstream_st* stream);

}  // namespace ms::cuda
