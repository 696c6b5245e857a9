// The CUDA kernels of ops/dwconv3d.h.
#pragma once
#include <cstdint>

#include "ops/dwconv3d.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/dwconv3d.cu), enqueued on `stream`: x, w, b, y, dy, dx bf16, dw and db fp32.
// Deterministic; scratch holds dwconv3d_backward_scratch(B * T * H * W, C) floats.
namespace ms::cuda {

void dwconv3d_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t B, int64_t Tn,
                      int64_t H, int64_t W, int64_t C, CUstream_st* stream);
void dwconv3d_backward(const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw, float* db,
                       float* scratch, int64_t B, int64_t Tn, int64_t H, int64_t W, int64_t C, CUstream_st* stream);

}  // namespace ms::cuda
