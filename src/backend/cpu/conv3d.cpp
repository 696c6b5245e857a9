// The dense convolution's CPU forward (ops/conv3d.h): im2col of a band of output pixels, then one GEMM per band,
// y[:, band] = w [co, K] x col [K, band]. The band is sized so that the unfolded buffer stays within kConvColBytes,
// which bounds the extra memory whatever the frame size (docs/vae.md).
#include "ops/conv3d.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/check.h"
#include "core/parallel.h"

namespace ms::cpu {
namespace {


int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// col [K, p1 - p0] = the kernel's taps over the output pixels [p0, p1), row r = ((c kt + a) kh + e) kw + f.
template <class T>
void unfold_band(const T* const* x, const ConvFrameDims& d, int64_t p0, int64_t p1, T* col) {
  const int64_t n = p1 - p0, up_h = d.up * d.h, up_w = d.up * d.w, plane = d.h * d.w;
  const int64_t taps = d.kt * d.kh * d.kw;
  parallel_for(
      d.k(),
      [&](int64_t r) {
        const int64_t c = r / taps, a = r / (d.kh * d.kw) % d.kt, e = r / d.kw % d.kh, f = r % d.kw;
        T* dst = col + r * n;
        const T* frame = x[a] ? x[a] + c * plane : nullptr;
        // Columns j whose source column j s + f - pad_left lies in [0, up_w).
        const int64_t j_lo = std::max<int64_t>(0, ceil_div(d.pad_left - f, d.stride));
        const int64_t j_hi = std::min<int64_t>(d.out_w, ceil_div(up_w - f + d.pad_left, d.stride));
        for (int64_t p = p0; p < p1;) {
          const int64_t i = p / d.out_w, j0 = p % d.out_w, j1 = std::min(d.out_w, j0 + (p1 - p));
          T* out = dst + (p - p0);
          const int64_t src_r = i * d.stride + e - d.pad_top;
          if (!frame || src_r < 0 || src_r >= up_h || j_lo >= j_hi) {
            std::fill(out, out + (j1 - j0), T(0));
          } else {
            const T* row = frame + (src_r / d.up) * d.w;
            const int64_t lo = std::clamp(j_lo, j0, j1), hi = std::clamp(j_hi, j0, j1);
            std::fill(out, out + (lo - j0), T(0));
            const int64_t shift = f - d.pad_left;  // source column of output column j: (j stride + shift) / up
            if (d.stride == 1 && d.up == 1) {
              std::memcpy(out + (lo - j0), row + lo + shift, size_t(hi - lo) * sizeof(T));
            } else if (d.stride == 1 && d.up == 2) {  // the decoder's upsamplers: a constant shift, not a division
              for (int64_t j = lo; j < hi; ++j) out[j - j0] = row[(j + shift) >> 1];
            } else if (d.stride == 2 && d.up == 1) {  // the encoder's downsamplers
              for (int64_t j = lo; j < hi; ++j) out[j - j0] = row[2 * j + shift];
            } else {
              for (int64_t j = lo; j < hi; ++j) out[j - j0] = row[(j * d.stride + shift) / d.up];
            }
            std::fill(out + (hi - j0), out + (j1 - j0), T(0));
          }
          p += j1 - j0;
        }
      },
      min_parallel_for_work(d.k(), double(d.k()) * double(n)));
}

}  // namespace

template <class T>
void conv3d_frame_forward(const ConvFrameParams<T>& p) {
  const T* const* x = p.x;
  const T *w = p.w, *b = p.b;
  T* y = p.y;
  const ConvFrameDims& d = p.d;
  MS_CHECK(d.ci > 0 && d.co > 0 && d.kt > 0 && d.kh > 0 && d.kw > 0 && d.h > 0 && d.w > 0 && d.up > 0 && d.stride > 0 &&
               d.out_h > 0 && d.out_w > 0,
           "conv3d_frame_forward: bad dims");
  const int64_t pixels = d.out_h * d.out_w, K = d.k();
  for (int64_t o = 0; o < d.co; ++o) std::fill(y + o * pixels, y + (o + 1) * pixels, b ? b[o] : T(0));
  if (d.pointwise()) {
    if (x[0]) gemm<T>(false, false, d.co, pixels, K, T(1), w, K, x[0], pixels, T(1), y, pixels);
    return;
  }
  static thread_local std::vector<T> col;
  const int64_t band = conv3d_band_pixels(d, int64_t(sizeof(T)));
  col.resize(size_t(K * band));
  for (int64_t p0 = 0; p0 < pixels; p0 += band) {
    const int64_t p1 = std::min(pixels, p0 + band);
    unfold_band(x, d, p0, p1, col.data());
    gemm<T>(false, false, d.co, p1 - p0, K, T(1), w, K, col.data(), p1 - p0, T(1), y + p0, pixels);
  }
}

template void conv3d_frame_forward<float>(const ConvFrameParams<float>&);
template void conv3d_frame_forward<double>(const ConvFrameParams<double>&);

}  // namespace ms::cpu
