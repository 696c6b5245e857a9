// LayerNorm over the last dim: y = (x - mean) * rstd [* w + b], rstd = 1/sqrt(var + eps) (biased var).
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cpu {

// x [N, C] -> y [N, C]; saves mean [N] and rstd [N]. w, b [C] may both be null (no affine).
template <class T>
void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, int64_t C, double eps);

// Inverts layernorm_forward. dx [N, C] += ...; dw, db [C] += ... (ignored when w, b are null).
template <class T>
void layernorm_backward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy, T* dx, T* dw, T* db,
                        int64_t N, int64_t C);

}  // namespace ms::cpu

// The CUDA kernels (backend/cuda/layernorm.cu), enqueued on `stream`: x, w, b, y, dy, dx bf16; mean, rstd,
// dw and db fp32. dw, db are summed in a fixed order through scratch [layernorm_backward_scratch(N, C)].
namespace ms::cuda {

void layernorm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, float* mean, float* rstd,
                       int64_t N, int64_t C, double eps, CUstream_st* stream);
int64_t layernorm_backward_scratch(int64_t N, int64_t C);
void layernorm_backward(const uint16_t* x, const uint16_t* w, const float* mean, const float* rstd, const uint16_t* dy,
                        uint16_t* dx, float* dw, float* db, float* scratch, int64_t N, int64_t C, CUstream_st* stream);

}  // namespace ms::cuda
