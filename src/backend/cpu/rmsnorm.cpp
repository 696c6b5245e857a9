#include "ops/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/row_sum.h"
#include "core/parallel.h"

namespace ms::cpu {

template <class T>
void rmsnorm_forward(const RmsNormParams<T>& p) {
  const T *x = p.x, *w = p.w;
  T *y = p.y, *rstd = p.rstd;
  const int64_t N = p.N, C = p.C;
  const double eps = p.eps;
  parallel_for(
      N,
      [&](int64_t n) {
        const T* xr = x + n * C;  // [C]
        T* yr = y + n * C;        // [C]
        const double s = row_sum(C, [&](int64_t c) { return double(xr[c]) * double(xr[c]); });
        const double rs = 1.0 / std::sqrt(s / double(C) + eps);
        for (int64_t c = 0; c < C; ++c) yr[c] = T(double(xr[c]) * rs * double(w[c]));
        rstd[n] = T(rs);
      },
      4);
}

template <class T>
void rmsnorm_backward(const RmsNormParams<T>& p) {
  const T *x = p.x, *w = p.w, *rstd = p.rstd, *dy = p.dy;
  T *dx = p.dx, *dw = p.dw;
  const int64_t N = p.N, C = p.C;
  // dx = rstd * (g - xhat * mean(g * xhat)), g = dy * w, xhat = x * rstd.
  parallel_for(
      N,
      [&](int64_t n) {
        const T* xr = x + n * C;    // [C]
        const T* dyr = dy + n * C;  // [C]
        T* dxr = dx + n * C;        // [C]
        const double rs = rstd[n];
        const double sgx =
            row_sum(C, [&](int64_t c) { return double(dyr[c]) * double(w[c]) * double(xr[c]) * rs; }) / double(C);
        for (int64_t c = 0; c < C; ++c) {
          const double xh = double(xr[c]) * rs;
          dxr[c] += T(rs * (double(dyr[c]) * double(w[c]) - xh * sgx));
        }
      },
      4);
  // dw [C] += sum_n dy * xhat: each task owns a block of channels.
  parallel_for((C + kNormChannelBlock - 1) / kNormChannelBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kNormChannelBlock, c1 = std::min(C, c0 + kNormChannelBlock);
    std::vector<double> sw(c1 - c0, 0.0);  // [c1 - c0]
    for (int64_t n = 0; n < N; ++n) {
      const double rs = rstd[n];
      for (int64_t c = c0; c < c1; ++c) sw[c - c0] += double(dy[n * C + c]) * double(x[n * C + c]) * rs;
    }
    for (int64_t c = c0; c < c1; ++c) dw[c] += T(sw[c - c0]);
  });
}

template void rmsnorm_forward<float>(const RmsNormParams<float>&);
template void rmsnorm_forward<double>(const RmsNormParams<double>&);
template void rmsnorm_backward<float>(const RmsNormParams<float>&);
template void rmsnorm_backward<double>(const RmsNormParams<double>&);

}  // namespace ms::cpu
