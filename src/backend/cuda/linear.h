// The CUDA kernels of ops/linear.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/linear.h"
#include "runtime/reduction_scratch.h"

namespace ms::cuda {
class GemmContext;
}

// The CUDA version (backend/cuda/linear.cu) on cuBLASLt, enqueued on `stream`: x, w, b, y, dy, dx bf16
// (the bias added in the GEMM's epilogue); dw, db fp32, accumulated; db summed in a fixed order through
// the launch's scratch [linear_backward_scratch(N, out)].
namespace ms::cuda {

void linear_forward(GemmContext& g, const LinearParams<uint16_t, uint16_t, float>& p, Stream stream);
void linear_backward(GemmContext& g, const LinearParams<uint16_t, uint16_t, float>& p, const Launch& l);

// y [rows, ld] (its first cols columns) += b [cols] on every row: the bias where cuBLASLt's epilogue cannot add it
// (GemmContext::gemm).
void add_row_bias(uint16_t* y, const uint16_t* b, int64_t rows, int64_t cols, int64_t ld, Stream stream);

// The same layer for a few rows in fp32 (the time path, B rows, which Wan computes in fp32): x, y, dy, dx, dw, db
// fp32, w, b bf16. Plain kernels (one warp per output; one thread per dx, dw element, summing in a fixed order):
// deterministic, and cheap at B rows.
void linear_f32_forward(const LinearParams<float, uint16_t, float>& p, Stream stream);
void linear_f32_backward(const LinearParams<float, uint16_t, float>& p, Stream stream);

}  // namespace ms::cuda
