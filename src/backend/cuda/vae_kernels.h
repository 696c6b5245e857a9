// Small fp32 kernels of the VAE on the GPU (backend/cuda/vae_ops.cpp): rows filled with a bias, residual adds, the
// attention's scaled softmax and Wan2.2's stage shortcuts. Each enqueued on `stream`.
#pragma once
#include <cstdint>

#include "runtime/vae_ops.h"

struct CUstream_st;

namespace ms::cuda {

// y [rows, cols]: y[r, :] = b[r], or 0 where b is null.
void fill_rows(float* y, const float* b, int64_t rows, int64_t cols, CUstream_st* stream);
// y [n] += x [n].
void add_into(float* y, const float* x, int64_t n, CUstream_st* stream);
// s [rows, n], in place: each row becomes softmax(scale * row), in fp32.
void softmax_rows(float* s, int64_t rows, int64_t n, float scale, CUstream_st* stream);
// runtime/vae_ops.h's avg_down and dup_up: a thread per output value, device pointers.
void avg_down_add(const VaeAvgDownParams& p, CUstream_st* stream);
void dup_up_add(const VaeDupUpParams& p, CUstream_st* stream);

}  // namespace ms::cuda
