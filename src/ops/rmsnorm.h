// RMSNorm over the last dim (Wan's WanRMSNorm): y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps).
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cpu {

// x [N, C], w [C] -> y [N, C]; saves rstd [N].
template <class T>
void rmsnorm_forward(const T* x, const T* w, T* y, T* rstd, int64_t N, int64_t C, double eps);

// Inverts rmsnorm_forward. dx [N, C] += ...; dw [C] += ....
template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, int64_t N, int64_t C);

}  // namespace ms::cpu

// The CUDA kernels (backend/cuda/rmsnorm.cu), enqueued on `stream`: x, w, y, dy, dx bf16; rstd and dw fp32
// (the statistics and the weight gradients stay in fp32). dw is summed in a fixed order through scratch
// [rmsnorm_backward_scratch(N, C)] fp32, so it is deterministic.
namespace ms::cuda {

void rmsnorm_forward(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t N, int64_t C, double eps,
                     CUstream_st* stream);
int64_t rmsnorm_backward_scratch(int64_t N, int64_t C);
void rmsnorm_backward(const uint16_t* x, const uint16_t* w, const float* rstd, const uint16_t* dy, uint16_t* dx,
                      float* dw, float* scratch, int64_t N, int64_t C, CUstream_st* stream);

}  // namespace ms::cuda
