// The CUDA kernels of ops/linear.h.
#pragma once
#include <cstdint>

#include "ops/linear.h"
#include "runtime/reduction_scratch.h"

struct CUstream_st;
namespace ms::cuda {
class GemmContext;
}

// The CUDA version (backend/cuda/linear.cu) on cuBLASLt, enqueued on `stream`: x, w, b, y, dy, dx bf16
// (the bias added in the GEMM's epilogue); dw, db fp32, accumulated; db summed in a fixed order through
// scratch [linear_backward_scratch(N, out)].
namespace ms::cuda {

void linear_forward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t N,
                    int64_t in, int64_t out, CUstream_st* stream);
void linear_backward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw,
                     float* db, float* scratch, int64_t N, int64_t in, int64_t out, CUstream_st* stream);

// y [rows, ld] (its first cols columns) += b [cols] on every row: the bias where cuBLASLt's epilogue cannot add it
// (GemmContext::gemm).
void add_row_bias(uint16_t* y, const uint16_t* b, int64_t rows, int64_t cols, int64_t ld, CUstream_st* stream);

// The same layer for a few rows in fp32 (the time path, B rows, which Wan computes in fp32): x, y, dy, dx, dw, db
// fp32, w, b bf16. Plain kernels (one warp per output; one thread per dx, dw element, summing in a fixed order):
// deterministic, and cheap at B rows.
void linear_f32_forward(const float* x, const uint16_t* w, const uint16_t* b, float* y, int64_t N, int64_t in,
                        int64_t out, CUstream_st* stream);
void linear_f32_backward(const float* x, const uint16_t* w, const float* dy, float* dx, float* dw, float* db, int64_t N,
                         int64_t in, int64_t out, CUstream_st* stream);

}  // namespace ms::cuda
