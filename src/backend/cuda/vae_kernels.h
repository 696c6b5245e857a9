// Small fp32 kernels of the VAE on the GPU (backend/cuda/vae_ops.cpp): rows filled with a bias, residual adds, and
// the attention's scaled softmax. Each enqueued on `stream`.
#pragma once
#include <cstdint>

struct CUstream_st;

namespace ms::cuda {

// y [rows, cols]: y[r, :] = b[r], or 0 where b is null.
void fill_rows(float* y, const float* b, int64_t rows, int64_t cols, CUstream_st* stream);
// y [n] += x [n].
void add_into(float* y, const float* x, int64_t n, CUstream_st* stream);
// s [rows, n], in place: each row becomes softmax(scale * row), in fp32.
void softmax_rows(float* s, int64_t rows, int64_t n, float scale, CUstream_st* stream);

}  // namespace ms::cuda
