#include "ops/dwconv3d.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"

namespace ms::cpu {
namespace {

constexpr int64_t kDwconvChannelBlock = 16;  // channels per weight-gradient task: one cache line of floats

// Calls fn(tap, nb) for the in-bounds neighbours of token (t, h, w): tap in [0, 27) t-major, nb the neighbour's
// token index. `sign` -1 visits the mirrored neighbours (t - dt, ...), for the transposed convolution.
template <class F>
void for_each_tap(int64_t t, int64_t h, int64_t w, int64_t Tn, int64_t H, int64_t W, int sign, F&& fn) {
  for (int64_t a = -1; a <= 1; ++a)
    for (int64_t e = -1; e <= 1; ++e)
      for (int64_t f = -1; f <= 1; ++f) {
        const int64_t tt = t + sign * a, hh = h + sign * e, ww = w + sign * f;
        if (tt < 0 || tt >= Tn || hh < 0 || hh >= H || ww < 0 || ww >= W) continue;
        fn(((a + 1) * 3 + e + 1) * 3 + f + 1, (tt * H + hh) * W + ww);
      }
}

// w [C, 27] -> [27, C], so that the per-tap loops over channels read the weights contiguously (as [C, 27] they were
// strided loads the compiler did not vectorise).
template <class T>
std::vector<T> taps_major(const T* w, int64_t C) {
  std::vector<T> wt(static_cast<size_t>(27 * C));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t tap = 0; tap < 27; ++tap) wt[size_t(tap * C + c)] = w[c * 27 + tap];
  return wt;
}

}  // namespace

template <class T>
void dwconv3d_forward(const Dwconv3dParams<T>& p) {
  const T *x = p.x, *w = p.w, *b = p.b;
  T* y = p.y;
  const int64_t B = p.B, Tn = p.Tn, H = p.H, W = p.W, C = p.C;
  const int64_t L = Tn * H * W;
  const std::vector<T> wt = taps_major(w, C);  // [27, C]
  parallel_for(
      B * L,
      [&](int64_t row) {
        const int64_t s = row / L, l = row % L, t = l / (H * W), h = (l / W) % H, ww = l % W;
        T* yr = y + row * C;  // [C]
        for (int64_t c = 0; c < C; ++c) yr[c] = b ? b[c] : T(0);
        for_each_tap(t, h, ww, Tn, H, W, 1, [&](int64_t tap, int64_t nb) {
          const T *xr = x + (s * L + nb) * C, *wr = wt.data() + tap * C;  // [C], [C]
#pragma omp simd
          for (int64_t c = 0; c < C; ++c) yr[c] += wr[c] * xr[c];
        });
      },
      min_parallel_for_work(B * L, 27.0 * double(B * L * C)));
}

template <class T>
void dwconv3d_backward(const Dwconv3dParams<T>& p) {
  const T *x = p.x, *w = p.w, *dy = p.dy;
  T *dx = p.dx, *dw = p.dw, *db = p.db;
  const int64_t B = p.B, Tn = p.Tn, H = p.H, W = p.W, C = p.C;
  const int64_t L = Tn * H * W;
  if (dx) {  // dx[token] = sum over the taps that read it: the mirrored neighbourhood, same tap weight
    const std::vector<T> wt = taps_major(w, C);  // [27, C]
    parallel_for(
        B * L,
        [&](int64_t row) {
          const int64_t s = row / L, l = row % L, t = l / (H * W), h = (l / W) % H, ww = l % W;
          T* dxr = dx + row * C;  // [C]
          for_each_tap(t, h, ww, Tn, H, W, -1, [&](int64_t tap, int64_t nb) {
            const T *dyr = dy + (s * L + nb) * C, *wr = wt.data() + tap * C;  // [C], [C]
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) dxr[c] += wr[c] * dyr[c];
          });
        },
        min_parallel_for_work(B * L, 27.0 * double(B * L * C)));
  }
  const int64_t nblocks = (C + kDwconvChannelBlock - 1) / kDwconvChannelBlock;
  parallel_for(
      nblocks,
      [&](int64_t blk) {
        const int64_t c0 = blk * kDwconvChannelBlock, nc = std::min(kDwconvChannelBlock, C - c0);
        T acc_w[27 * kDwconvChannelBlock] = {}, acc_b[kDwconvChannelBlock] = {};  // [27, kDwconvChannelBlock], [nc]
        for (int64_t row = 0; row < B * L; ++row) {
          const int64_t s = row / L, l = row % L, t = l / (H * W), h = (l / W) % H, ww = l % W;
          const T* dyr = dy + row * C + c0;  // [nc]
          for (int64_t c = 0; c < nc; ++c) acc_b[c] += dyr[c];
          for_each_tap(t, h, ww, Tn, H, W, 1, [&](int64_t tap, int64_t nb) {
            const T* xr = x + (s * L + nb) * C + c0;
            T* acc = acc_w + tap * kDwconvChannelBlock;
#pragma omp simd
            for (int64_t c = 0; c < nc; ++c) acc[c] += dyr[c] * xr[c];
          });
        }
        for (int64_t c = 0; c < nc; ++c) {
          for (int64_t tap = 0; tap < 27; ++tap) dw[(c0 + c) * 27 + tap] += acc_w[tap * kDwconvChannelBlock + c];
          if (db) db[c0 + c] += acc_b[c];
        }
      },
      min_parallel_for_work(nblocks, 27.0 * double(B * L * C)));
}

template void dwconv3d_forward<float>(const Dwconv3dParams<float>&);
template void dwconv3d_forward<double>(const Dwconv3dParams<double>&);
template void dwconv3d_backward<float>(const Dwconv3dParams<float>&);
template void dwconv3d_backward<double>(const Dwconv3dParams<double>&);

}  // namespace ms::cpu
