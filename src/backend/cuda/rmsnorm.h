// The CUDA kernels of ops/rmsnorm.h.
#pragma once
#include <cstdint>

#include "ops/rmsnorm.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/rmsnorm.cu), enqueued on `stream`: x, w, y, dy, dx bf16; rstd and dw fp32
// (the statistics and the weight gradients stay in fp32). dw is summed in a fixed order through scratch
// [rmsnorm_backward_scratch(N, C)] fp32, so it is deterministic.
namespace ms::cuda {

void rmsnorm_forward(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t N, int64_t C, double eps,
                     CUstream_st* stream);
// The same on an fp32 x (a residual stream kept in fp32: the text encoder's), to bf16 or fp32 y.
void rmsnorm_forward(const float* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t N, int64_t C, double eps,
                     CUstream_st* stream);
void rmsnorm_forward(const float* x, const uint16_t* w, float* y, float* rstd, int64_t N, int64_t C, double eps,
                     CUstream_st* stream);
void rmsnorm_backward(const uint16_t* x, const uint16_t* w, const float* rstd, const uint16_t* dy, uint16_t* dx,
                      float* dw, float* scratch, int64_t N, int64_t C, CUstream_st* stream);

}  // namespace ms::cuda
