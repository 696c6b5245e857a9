#include "ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/row_sum.h"
#include "core/parallel.h"

namespace ms::cpu {

template <class T>
void layernorm_forward(const LayerNormParams<T>& p) {
  const T *x = p.x, *w = p.w, *b = p.b;
  T *y = p.y, *mean = p.mean, *rstd = p.rstd;
  const int64_t N = p.N, C = p.C;
  const double eps = p.eps;
  parallel_for(
      N,
      [&](int64_t n) {
        const T* xr = x + n * C;  // [C]
        T* yr = y + n * C;        // [C]
        const double mu = row_sum(C, [&](int64_t c) { return double(xr[c]); }) / double(C);
        const double v = row_sum(C, [&](int64_t c) { return (double(xr[c]) - mu) * (double(xr[c]) - mu); });
        const double rs = 1.0 / std::sqrt(v / double(C) + eps);
        for (int64_t c = 0; c < C; ++c) {
          double h = (double(xr[c]) - mu) * rs;
          if (w) h *= double(w[c]);
          if (b) h += double(b[c]);
          yr[c] = T(h);
        }
        mean[n] = T(mu);
        rstd[n] = T(rs);
      },
      4);
}

template <class T>
void layernorm_backward(const LayerNormParams<T>& p) {
  const T *x = p.x, *w = p.w, *mean = p.mean, *rstd = p.rstd, *dy = p.dy;
  T *dx = p.dx, *dw = p.dw, *db = p.db;
  const int64_t N = p.N, C = p.C;
  // dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w, xhat = (x - mean) * rstd.
  parallel_for(
      N,
      [&](int64_t n) {
        const T* xr = x + n * C;    // [C]
        const T* dyr = dy + n * C;  // [C]
        T* dxr = dx + n * C;        // [C]
        const double mu = mean[n], rs = rstd[n];
        double sg, sgx;
        row_sums(
            C,
            [&](int64_t c) {
              const double g = w ? double(dyr[c]) * double(w[c]) : double(dyr[c]);
              return std::pair{g, g * (double(xr[c]) - mu) * rs};
            },
            sg, sgx);
        sg /= double(C);
        sgx /= double(C);
        for (int64_t c = 0; c < C; ++c) {
          const double g = w ? double(dyr[c]) * double(w[c]) : double(dyr[c]);
          const double xh = (double(xr[c]) - mu) * rs;
          dxr[c] += T(rs * (g - sg - xh * sgx));
        }
      },
      4);
  if (!w) return;  // no affine (w and b null together): dw, db ignored
  // dw [C] += sum_n dy * xhat, db [C] += sum_n dy: each task owns a block of channels.
  parallel_for((C + kNormChannelBlock - 1) / kNormChannelBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kNormChannelBlock, c1 = std::min(C, c0 + kNormChannelBlock);
    std::vector<double> sw(c1 - c0, 0.0), sb(c1 - c0, 0.0);  // [c1 - c0]
    for (int64_t n = 0; n < N; ++n) {
      const double mu = mean[n], rs = rstd[n];
      for (int64_t c = c0; c < c1; ++c) {
        const double g = dy[n * C + c];
        sw[c - c0] += g * (double(x[n * C + c]) - mu) * rs;
        sb[c - c0] += g;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dw[c] += T(sw[c - c0]);
      db[c] += T(sb[c - c0]);
    }
  });
}

template void layernorm_forward<float>(const LayerNormParams<float>&);
template void layernorm_forward<double>(const LayerNormParams<double>&);
template void layernorm_backward<float>(const LayerNormParams<float>&);
template void layernorm_backward<double>(const LayerNormParams<double>&);

}  // namespace ms::cpu
