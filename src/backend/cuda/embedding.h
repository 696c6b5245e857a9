// The CUDA kernels of ops/embedding.h.
#pragma once
#include <cstdint>

#include "ops/embedding.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/embedding.cu), enqueued on `stream`: the timestep embedding in fp32
// (computed in float64), the context padded from fp32 into bf16 (and its gradient back to fp32).
namespace ms::cuda {

void sinusoidal_embedding(const float* t, float* out, int64_t B, int64_t dim, CUstream_st* stream);
void pad_context_forward(const float* context, uint16_t* padded, int64_t B, int64_t Lc, int64_t Lt, int64_t C,
                         CUstream_st* stream);
void pad_context_backward(const uint16_t* dpadded, float* dcontext, int64_t B, int64_t Lc, int64_t Lt, int64_t C,
                          CUstream_st* stream);

}  // namespace ms::cuda
