#include "ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "backend/cpu/row_sum.h"
#include "core/parallel.h"

namespace ms::cpu {

namespace {
constexpr int64_t kChannelBlock = 64;  // channels per task in the dw/db reductions over rows
}

template <class T>
void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, int64_t C, double eps) {
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
void layernorm_backward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy, T* dx, T* dw, T* db,
                        int64_t N, int64_t C) {
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
  parallel_for((C + kChannelBlock - 1) / kChannelBlock, [&](int64_t blk) {
    const int64_t c0 = blk * kChannelBlock, c1 = std::min(C, c0 + kChannelBlock);
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

template void layernorm_forward<float>(const float*, const float*, const float*, float*, float*, float*, int64_t,
                                       int64_t, double);
template void layernorm_forward<double>(const double*, const double*, const double*, double*, double*, double*, int64_t,
                                        int64_t, double);
template void layernorm_backward<float>(const float*, const float*, const float*, const float*, const float*, float*,
                                        float*, float*, int64_t, int64_t);
template void layernorm_backward<double>(const double*, const double*, const double*, const double*, const double*,
                                         double*, double*, double*, int64_t, int64_t);

}  // namespace ms::cpu
