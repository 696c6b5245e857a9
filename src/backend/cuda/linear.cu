#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_util.cuh"
#include "ops/linear.h"

namespace ms::cuda {

void linear_forward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t N,
                    int64_t in, int64_t out, Stream stream) {
  // y [N, out] = x [N, in] w^T (w stored [out, in]) + b
  g.gemm<uint16_t>(false, true, N, out, in, 1.f, x, in, w, in, 0.f, y, out, stream, b);
}

int64_t linear_backward_scratch(int64_t N, int64_t out) { return column_scratch(N, out); }

void linear_backward(GemmContext& g, const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw,
                     float* db, float* scratch, int64_t N, int64_t in, int64_t out, Stream stream) {
  // dx [N, in] += dy [N, out] w [out, in]
  if (dx) g.gemm<uint16_t>(false, false, N, in, out, 1.f, dy, out, w, in, 1.f, dx, in, stream);
  // dw [out, in] += dy^T [out, N] x [N, in]
  g.gemm<float>(true, false, out, in, N, 1.f, dy, out, x, in, 1.f, dw, in, stream);
  // db [out] += sum_n dy
  if (db)
    column_sum([=] __device__(int64_t n, int64_t c) { return load(dy, n * out + c); }, db, scratch, N, out, stream);
}

}  // namespace ms::cuda
