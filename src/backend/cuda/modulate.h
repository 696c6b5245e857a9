// The CUDA kernels of ops/modulate.h.
#pragma once
#include <cstdint>

#include "ops/modulate.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/modulate.cu), enqueued on `stream`: x, y, dy, dx, out, dout bf16 activations;
// shift, scale, gate and their gradients fp32 (the modulation comes from the fp32 time embedding). The
// per-sample sums over L go through scratch [modulate_backward_scratch(L, C)] in a fixed order.
namespace ms::cuda {

void modulate_forward(const uint16_t* x, const float* shift, const float* scale, uint16_t* y, int64_t B, int64_t L,
                      int64_t C, int64_t stride, CUstream_st* stream);
void modulate_backward(const uint16_t* x, const float* scale, const uint16_t* dy, uint16_t* dx, float* dshift,
                       float* dscale, float* scratch, int64_t B, int64_t L, int64_t C, int64_t stride,
                       CUstream_st* stream);
void gate_residual_forward(const uint16_t* x, const uint16_t* y, const float* gate, uint16_t* out, int64_t B, int64_t L,
                           int64_t C, int64_t stride, CUstream_st* stream);
void gate_residual_backward(const uint16_t* y, const float* gate, const uint16_t* dout, uint16_t* dx, uint16_t* dy,
                            float* dgate, float* scratch, int64_t B, int64_t L, int64_t C, int64_t stride,
                            CUstream_st* stream);
// The modulation: param bf16 (a weight), e, mod and the gradients fp32; the same sums in the same order as the CPU.
void modulation_forward(const uint16_t* param, const float* e, float* mod, int64_t B, int64_t K, int64_t C,
                        bool per_chunk, CUstream_st* stream);
void modulation_backward(const float* dmod, float* dparam, float* de, int64_t B, int64_t K, int64_t C, bool per_chunk,
                         CUstream_st* stream);

}  // namespace ms::cuda
