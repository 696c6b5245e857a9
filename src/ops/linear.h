// Linear layer: y = x W^T + b (torch.nn.Linear).
#pragma once
#include <cstdint>

struct CUstream_st;
namespace ms::cuda {
class GemmContext;
}

namespace ms::cpu {

// x [N, in], w [out, in], b [out] or null -> y [N, out] (overwritten).
template <class T>
void linear_forward(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t in, int64_t out);

// Inverts linear_forward. Accumulates: dx [N, in] += dy W (skipped when dx is null),
// dw [out, in] += dy^T x, db [out] += sum_n dy (skipped when db is null).
template <class T>
void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t N, int64_t in, int64_t out);

}  // namespace ms::cpu

// The CUDA version (backend/cuda/linear.cu) on cuBLASLt, enqueued on `stream`: x, w, b, y, dy, dx bf16
// (the bias added in the GEMM's epilogue); dw, db fp32, accumulated; db summed in a fixed order through
// scratch [linear_backward_scratch(N, out)].
namespace ms::cuda {

void linear_forward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t N,
                    int64_t in, int64_t out, CUstream_st* stream);
int64_t linear_backward_scratch(int64_t N, int64_t out);
void linear_backward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw,
                     float* db, float* scratch, int64_t N, int64_t in, int64_t out, CUstream_st* stream);

// The same layer for a few rows in fp32 (the time path, B rows, which Wan computes in fp32): x, y, dy, dx, dw, db
// fp32, w, b bf16. Plain kernels (one warp per output; one thread per dx, dw element, summing in a fixed order):
// deterministic, and cheap at B rows.
void linear_f32_forward(const float* x, const uint16_t* w, const uint16_t* b, float* y, int64_t N, int64_t in,
                        int64_t out, CUstream_st* stream);
void linear_f32_backward(const float* x, const uint16_t* w, const float* dy, float* dx, float* dw, float* db, int64_t N,
                         int64_t in, int64_t out, CUstream_st* stream);

}  // namespace ms::cuda
