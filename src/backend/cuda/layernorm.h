// The CUDA kernels of ops/layernorm.h.
#pragma once
#include <cstdint>

#include "ops/layernorm.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/layernorm.cu), enqueued on `stream`: x, w, b, y, dy, dx bf16; mean, rstd,
// dw and db fp32. dw, db are summed in a fixed order through scratch [layernorm_backward_scratch(N, C)].
namespace ms::cuda {

void layernorm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, float* mean, float* rstd,
                       int64_t N, int64_t C, double eps, CUstream_st* stream);
void layernorm_backward(const uint16_t* x, const uint16_t* w, const float* mean, const float* rstd, const uint16_t* dy,
                        uint16_t* dx, float* dw, float* db, float* scratch, int64_t N, int64_t C, CUstream_st* stream);

}  // namespace ms::cuda
