#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/linear.h"

namespace ms::cuda {
namespace {

// y [N, out] = x w^T + b: one warp per output, its lanes striding over `in`, then a fixed butterfly.
__global__ void linear_f32_forward_kernel(const float* x, const uint16_t* w, const uint16_t* b, float* y, int64_t N,
                                          int64_t in, int64_t out) {
  const int64_t warp = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= N * out) return;  // the warp index is the same for all 32 lanes: whole warps leave
  const int64_t n = warp / out, o = warp % out;
  float s = 0;
  for (int64_t i = lane; i < in; i += 32) s += x[n * in + i] * load(w, o * in + i);
  for (int k = 16; k > 0; k >>= 1) s += __shfl_xor_sync(0xffffffffu, s, k);
  if (lane == 0) y[warp] = s + (b ? load(b, o) : 0.f);
}

// dx [N, in] += dy w: one thread per element, o in order.
__global__ void linear_f32_dx_kernel(const uint16_t* w, const float* dy, float* dx, int64_t N, int64_t in,
                                     int64_t out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= N * in) return;
  const int64_t n = e / in, i = e % in;
  float s = 0;
  for (int64_t o = 0; o < out; ++o) s += dy[n * out + o] * load(w, o * in + i);
  dx[e] += s;
}

// dw [out, in] += dy^T x, and db [out] += sum_n dy from the threads of column 0: one thread per element, n in order.
__global__ void linear_f32_dw_kernel(const float* x, const float* dy, float* dw, float* db, int64_t N, int64_t in,
                                     int64_t out) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= out * in) return;
  const int64_t o = e / in, i = e % in;
  float s = 0, t = 0;
  for (int64_t n = 0; n < N; ++n) {
    s += dy[n * out + o] * x[n * in + i];
    t += dy[n * out + o];
  }
  dw[e] += s;
  if (db && i == 0) db[o] += t;
}

// y [rows, ld] (first cols columns) += b [cols], rounded to bf16 again.
__global__ void add_row_bias_kernel(uint16_t* y, const uint16_t* b, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < rows * cols;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = e / cols, c = e % cols;
    store(y, r * ld + c, load(y, r * ld + c) + load(b, c));
  }
}

unsigned blocks_of(int64_t threads) { return unsigned((threads + 255) / 256); }

}  // namespace

void linear_f32_forward(const LinearParams<float, uint16_t, float>& p, Stream stream) {
  const float* x = p.x;
  const uint16_t *w = p.w, *b = p.b;
  float* y = p.y;
  const int64_t N = p.N, in = p.in, out = p.out;
  if (N * out == 0) return;
  linear_f32_forward_kernel<<<blocks_of(32 * N * out), 256, 0, stream>>>(x, w, b, y, N, in, out);
  MS_CUDA_CHECK_LAUNCH();
}

void linear_f32_backward(const LinearParams<float, uint16_t, float>& p, Stream stream) {
  const float *x = p.x, *dy = p.dy;
  const uint16_t* w = p.w;
  float *dx = p.dx, *dw = p.dw, *db = p.db;
  const int64_t N = p.N, in = p.in, out = p.out;
  if (dx && N * in > 0) {
    linear_f32_dx_kernel<<<blocks_of(N * in), 256, 0, stream>>>(w, dy, dx, N, in, out);
    MS_CUDA_CHECK_LAUNCH();
  }
  if (out * in == 0) return;
  linear_f32_dw_kernel<<<blocks_of(out * in), 256, 0, stream>>>(x, dy, dw, db, N, in, out);
  MS_CUDA_CHECK_LAUNCH();
}

void add_row_bias(uint16_t* y, const uint16_t* b, int64_t rows, int64_t cols, int64_t ld, Stream stream) {
  if (rows * cols == 0) return;
  add_row_bias_kernel<<<elementwise_blocks(rows * cols), 256, 0, stream>>>(y, b, rows, cols, ld);
  MS_CUDA_CHECK_LAUNCH();
}

void linear_forward(GemmContext& g, const LinearParams<uint16_t, uint16_t, float>& p, Stream stream) {
  const uint16_t *x = p.x, *w = p.w, *b = p.b;
  uint16_t* y = p.y;
  const int64_t N = p.N, in = p.in, out = p.out;
  // y [N, out] = x [N, in] w^T (w stored [out, in]) + b
  g.gemm<uint16_t>(false, true, N, out, in, 1.f, x, in, w, in, 0.f, y, out, stream, b);
}

void linear_backward(GemmContext& g, const LinearParams<uint16_t, uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *w = p.w, *dy = p.dy;
  uint16_t* dx = p.dx;
  float *dw = p.dw, *db = p.db;
  const int64_t N = p.N, in = p.in, out = p.out;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(linear_backward_scratch(N, out));
  // dx [N, in] += dy [N, out] w [out, in]
  if (dx) g.gemm<uint16_t>(false, false, N, in, out, 1.f, dy, out, w, in, 1.f, dx, in, stream);
  // dw [out, in] += dy^T [out, N] x [N, in]
  g.gemm<float>(true, false, out, in, N, 1.f, dy, out, x, in, 1.f, dw, in, stream);
  // db [out] += sum_n dy
  if (db)
    column_sum([=] __device__(int64_t n, int64_t c) { return load(dy, n * out + c); }, db, scratch, N, out, stream);
}

}  // namespace ms::cuda
