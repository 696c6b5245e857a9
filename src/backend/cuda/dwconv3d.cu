// The depthwise 3x3x3 convolution on the GPU (ops/dwconv3d.h, CUDA section): a thread per (token, channel), channels
// fastest so that a warp reads consecutive channels of one token. The weight and bias gradients are column sums in a
// fixed order: partials over kDwconvRows tokens (27 taps and the bias per thread), then over the partials.
#include "backend/cuda/dwconv3d.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

struct Grid {
  int64_t B, T, H, W, C;
  __device__ int64_t L() const { return T * H * W; }
};

// Calls f(tap, neighbour row) for the in-bounds neighbours of row (sample s, token l): tap t-major in [0, 27);
// sign -1 visits the mirrored neighbours (the transposed convolution's).
template <class F>
__device__ inline void for_each_tap(const Grid& g, int64_t row, int sign, F f) {
  const int64_t L = g.L(), s = row / L, l = row % L, t = l / (g.H * g.W), h = l / g.W % g.H, w = l % g.W;
#pragma unroll
  for (int a = -1; a <= 1; ++a)
#pragma unroll
    for (int e = -1; e <= 1; ++e)
#pragma unroll
      for (int c = -1; c <= 1; ++c) {
        const int64_t tt = t + sign * a, hh = h + sign * e, ww = w + sign * c;
        if (tt < 0 || tt >= g.T || hh < 0 || hh >= g.H || ww < 0 || ww >= g.W) continue;
        f(((a + 1) * 3 + e + 1) * 3 + c + 1, s * L + (tt * g.H + hh) * g.W + ww);
      }
}

__global__ void forward_kernel(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, Grid g) {
  const int64_t n = g.B * g.L() * g.C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.C;
    float acc = b ? load(b, c) : 0.f;
    for_each_tap(g, i / g.C, 1, [&](int tap, int64_t nb) { acc += load(w, c * 27 + tap) * load(x, nb * g.C + c); });
    store(y, i, acc);
  }
}

__global__ void input_grad_kernel(const uint16_t* w, const uint16_t* dy, uint16_t* dx, Grid g) {
  const int64_t n = g.B * g.L() * g.C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = i % g.C;
    float acc = 0;
    for_each_tap(g, i / g.C, -1, [&](int tap, int64_t nb) { acc += load(w, c * 27 + tap) * load(dy, nb * g.C + c); });
    store(dx, i, load(dx, i) + acc);
  }
}

// partial [chunks, 28, C]: thread (chunk, c) sums dy x over its kDwconvRows rows per tap, and dy (tap 27).
__global__ void weight_partials(const uint16_t* x, const uint16_t* dy, float* partial, Grid g) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= g.C) return;
  float acc[28] = {};
  const int64_t r0 = chunk * kDwconvRows, r1 = min(g.B * g.L(), r0 + kDwconvRows);
  for (int64_t row = r0; row < r1; ++row) {
    const float gy = load(dy, row * g.C + c);
    acc[27] += gy;
    for_each_tap(g, row, 1, [&](int tap, int64_t nb) { acc[tap] += gy * load(x, nb * g.C + c); });
  }
  for (int tap = 0; tap < 28; ++tap) partial[(chunk * 28 + tap) * g.C + c] = acc[tap];
}

// dw [C, 27] +=, db [C] += (when not null): thread (c, tap) over the partials in chunk order.
__global__ void weight_finish(const float* partial, float* dw, float* db, int64_t chunks, int64_t C) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, c = i / 28, tap = i % 28;
  if (c >= C) return;
  float s = 0;
  for (int64_t k = 0; k < chunks; ++k) s += partial[(k * 28 + tap) * C + c];
  if (tap < 27)
    dw[c * 27 + tap] += s;
  else if (db)
    db[c] += s;
}

}  // namespace

void dwconv3d_forward(const Dwconv3dParams<uint16_t, float>& p, Stream stream) {
  const uint16_t *x = p.x, *w = p.w, *b = p.b;
  uint16_t* y = p.y;
  const int64_t B = p.B, Tn = p.Tn, H = p.H, W = p.W, C = p.C;
  const int64_t n = B * Tn * H * W * C;
  if (n == 0) return;
  forward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, w, b, y, Grid{B, Tn, H, W, C});
  MS_CUDA_CHECK_LAUNCH();
}

void dwconv3d_backward(const Dwconv3dParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *w = p.w, *dy = p.dy;
  uint16_t* dx = p.dx;
  float *dw = p.dw, *db = p.db;
  const int64_t B = p.B, Tn = p.Tn, H = p.H, W = p.W, C = p.C;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(dwconv3d_backward_scratch(B * Tn * H * W, C));
  const Grid g{B, Tn, H, W, C};
  const int64_t rows = B * Tn * H * W, chunks = (rows + kDwconvRows - 1) / kDwconvRows;
  if (rows == 0 || C == 0) return;
  if (dx) {
    input_grad_kernel<<<elementwise_blocks(rows * C), 256, 0, stream>>>(w, dy, dx, g);
    MS_CUDA_CHECK_LAUNCH();
  }
  MS_CHECK(chunks <= 65535, "cuda dwconv3d: ", rows, " tokens; at most ", 65535 * kDwconvRows);
  weight_partials<<<dim3(unsigned((C + 127) / 128), unsigned(chunks)), 128, 0, stream>>>(x, dy, scratch, g);
  MS_CUDA_CHECK_LAUNCH();
  weight_finish<<<unsigned((C * 28 + 255) / 256), 256, 0, stream>>>(scratch, dw, db, chunks, C);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
