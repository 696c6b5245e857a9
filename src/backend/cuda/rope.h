// The CUDA kernels of ops/rope.h.
#pragma once
#include <cstdint>

#include "ops/rope.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/rope.cu) on bf16 [B, F, H, W, nh, d], angles in float64, enqueued on
// `stream`; y may alias x and dx may alias dy.
namespace ms::cuda {

void rope_forward(const uint16_t* x, uint16_t* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d,
                  CUstream_st* stream);
void rope_backward(const uint16_t* dy, uint16_t* dx, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d,
                   CUstream_st* stream);

}  // namespace ms::cuda
