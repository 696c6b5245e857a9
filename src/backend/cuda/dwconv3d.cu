// The depthwise 3x3x3 convolution on the GPU (ops/dwconv3d.h, CUDA section): a thread per (channel, line of W
// tokens), channels fastest so that a warp reads consecutive channels of one token; a token's coordinates come from
// the grid and a walk along the line, not from 64-bit divisions per element. The weight and bias gradients are column
// sums in a fixed order: partials over kDwconvRows tokens (27 taps and the bias per thread), then over the partials.
#include <algorithm>

#include "backend/cuda/dwconv3d.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

struct Grid {
  int64_t B, T, H, W, C;
  __device__ int64_t L() const { return T * H * W; }
  __device__ int64_t lines() const { return B * T * H; }  // rows of W tokens: (sample, t, h)
};

// A token's coordinates, walked along its row so that no thread divides per element.
struct Token {
  int64_t s, t, h, w;
  __device__ int64_t row(const Grid& g) const { return ((s * g.T + t) * g.H + h) * g.W + w; }
  __device__ void next(const Grid& g) {  // the following token in row order
    if (++w < g.W) return;
    w = 0;
    if (++h < g.H) return;
    h = 0;
    if (++t < g.T) return;
    t = 0;
    ++s;
  }
};

// The first token of line `line` (sample, t, h) of g.
__device__ inline Token line_start(const Grid& g, int64_t line) {
  return {line / (g.T * g.H), line / g.H % g.T, line % g.H, 0};
}

// Calls f(tap, neighbour row) for the in-bounds neighbours of token k: tap t-major in [0, 27); sign -1 visits the
// mirrored neighbours (the transposed convolution's).
template <class F>
__device__ inline void for_each_tap(const Grid& g, const Token& k, int sign, F f) {
#pragma unroll
  for (int a = -1; a <= 1; ++a)
#pragma unroll
    for (int e = -1; e <= 1; ++e)
#pragma unroll
      for (int c = -1; c <= 1; ++c) {
        const int64_t tt = k.t + sign * a, hh = k.h + sign * e, ww = k.w + sign * c;
        if (tt < 0 || tt >= g.T || hh < 0 || hh >= g.H || ww < 0 || ww >= g.W) continue;
        f(((a + 1) * 3 + e + 1) * 3 + c + 1, (k.s * g.T + tt) * g.H * g.W + hh * g.W + ww);
      }
}

// Thread (channel c, line): the channel's 27 taps in registers, then the line's W tokens one after another; a
// warp's lanes are consecutive channels of one token. dy = y of the forward, or dy of the transposed convolution
// (sign -1) for dx, added to what dx holds.
__global__ void tap_sum_kernel(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, Grid g, int sign) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= g.C) return;
  float taps[27];
#pragma unroll
  for (int tap = 0; tap < 27; ++tap) taps[tap] = load(w, c * 27 + tap);
  const float bias = b ? load(b, c) : 0.f;
  for (int64_t line = blockIdx.y; line < g.lines(); line += gridDim.y)
    for (Token k = line_start(g, line); k.w < g.W; ++k.w) {
      const int64_t i = k.row(g) * g.C + c;
      float acc = sign > 0 ? bias : 0.f;
      for_each_tap(g, k, sign, [&](int tap, int64_t nb) { acc += taps[tap] * load(x, nb * g.C + c); });
      store(y, i, sign > 0 ? acc : load(y, i) + acc);
    }
}

// partial [chunks, 28, C]: thread (chunk, c) sums dy x over its kDwconvRows rows per tap, and dy (tap 27).
__global__ void weight_partials(const uint16_t* x, const uint16_t* dy, float* partial, Grid g) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (c >= g.C) return;
  float acc[28] = {};
  const int64_t r0 = chunk * kDwconvRows, r1 = min(g.B * g.L(), r0 + kDwconvRows);
  const int64_t L = g.L(), l0 = r0 % L;
  Token k{r0 / L, l0 / (g.H * g.W), l0 / g.W % g.H, l0 % g.W};  // divided once per thread
  for (int64_t row = r0; row < r1; ++row, k.next(g)) {
    const float gy = load(dy, row * g.C + c);
    acc[27] += gy;
    for_each_tap(g, k, 1, [&](int tap, int64_t nb) { acc[tap] += gy * load(x, nb * g.C + c); });
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

// Blocks of 128 channels along x, lines along y (at most 65535; a block then walks several lines).
dim3 line_blocks(const Grid& g) {
  return dim3(unsigned((g.C + 127) / 128), unsigned(std::min<int64_t>(g.B * g.T * g.H, 65535)));
}

}  // namespace

void dwconv3d_forward(const Dwconv3dParams<uint16_t, float>& p, Stream stream) {
  const uint16_t *x = p.x, *w = p.w, *b = p.b;
  uint16_t* y = p.y;
  const int64_t B = p.B, Tn = p.Tn, H = p.H, W = p.W, C = p.C;
  const int64_t n = B * Tn * H * W * C;
  if (n == 0) return;
  const Grid g{B, Tn, H, W, C};
  tap_sum_kernel<<<line_blocks(g), 128, 0, stream>>>(x, w, b, y, g, 1);
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
    tap_sum_kernel<<<line_blocks(g), 128, 0, stream>>>(dy, w, nullptr, dx, g, -1);
    MS_CUDA_CHECK_LAUNCH();
  }
  MS_CHECK(chunks <= 65535, "cuda dwconv3d: ", rows, " tokens; at most ", 65535 * kDwconvRows);
  weight_partials<<<dim3(unsigned((C + 127) / 128), unsigned(chunks)), 128, 0, stream>>>(x, dy, scratch, g);
  MS_CUDA_CHECK_LAUNCH();
  weight_finish<<<unsigned((C * 28 + 255) / 256), 256, 0, stream>>>(scratch, dw, db, chunks, C);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
