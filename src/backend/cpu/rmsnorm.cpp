#include "ops/rmsnorm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "backend/cpu/row_sum.h"
#include "core/parallel.h"

namespace ms::cpu {

namespace {
constexpr int64_t kChannelBlock = 64;  // channels per task in the dw reduction over rows
}

template <class T>
void rmsnorm_forward(const T* x, const T* w, T* y, T* rstd, int64_t N, int64_t C, double eps) {
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
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, int64_t N, int64_t C) {
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
  parallel_for((C + kChannelBlock - 1) / kChannelBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
    std::vector<double> sw(c1 - c0, 0.0);  // [c1 - c0]
    for (int64_t n = 0; n < N; ++n) {
      const double rs = rstd[n];
      for (int64_t c = c0; c < c1; ++c) sw[c - c0] += double(dy[n * C + c]) * double(x[n * C + c]) * rs;
    }
    for (int64_t c = c0; c < c1; ++c) dw[c] += T(sw[c - c0]);
  });
}

template void rmsnorm_forward<float>(const float*, const float*, float*, float*, int64_t, int64_t, double);
template void rmsnorm_forward<double>(const double*, const double*, double*, double*, int64_t, int64_t, double);
template void rmsnorm_backward<float>(const float*, const float*, const float*, const float*, float*, float*, int64_t,
                                      int64_t);
template void rmsnorm_backward<double>(const double*, const double*, const double*, const double*, double*, double*,
                                       int64_t, int64_t);

}  // namespace ms::cpu
