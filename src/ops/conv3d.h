// Dense convolution, forward only (the frozen video VAE, src/vae/): one output frame of torch's Conv3d / Conv2d on
// channels-first frames. Output frame y [Co, Ho, Wo] from the kt input frames [Ci, H, W] the kernel's time window
// covers, kernel w [Co, Ci, kt, kh, kw] (torch's layout; kt = 1 is a Conv2d's [Co, Ci, kh, kw]):
//   y[o, i, j] = b[o] + sum_{c, a, e, f} w[o, c, a, e, f] * X_a[c, i * stride + e - pad_top, j * stride + f - pad_left]
// where X_a is input frame a read nearest-upsampled by `up` (X_a[c, r, s] = x_a[c, r / up, s / up], torch's
// 'nearest' / 'nearest-exact' for an integer factor) and zero outside [0, up H) x [0, up W); a null frame pointer is
// a frame of zeros (causal time padding). Padding after the frame is whatever Ho, Wo imply (Wan's downsampler pads
// the right and bottom only).
#pragma once
#include <algorithm>
#include <cstdint>

namespace ms {

struct ConvFrameDims {
  int64_t ci = 0, co = 0;          // channels in, out
  int64_t kt = 1, kh = 1, kw = 1;  // kernel extent in time, rows, columns
  int64_t h = 0, w = 0;            // input frame (before upsampling)
  int64_t up = 1;                  // nearest upsampling of the input, 1 or more
  int64_t stride = 1;              // spatial stride (rows and columns)
  int64_t pad_top = 0, pad_left = 0;
  int64_t out_h = 0, out_w = 0;

  int64_t k() const { return ci * kt * kh * kw; }  // GEMM depth
  // A 1x1x1 kernel at stride 1 without padding or upsampling: the weights times the frame, nothing to unfold.
  bool pointwise() const {
    return kt == 1 && kh == 1 && kw == 1 && up == 1 && stride == 1 && pad_top == 0 && pad_left == 0 && out_h == h &&
           out_w == w;
  }
  double flops() const { return 2.0 * double(co) * double(k()) * double(out_h * out_w); }
};

// Output size of a convolution over n (upsampled) positions with padding before + after: (n + pads - k) / s + 1.
inline int64_t conv_out_size(int64_t n, int64_t k, int64_t stride, int64_t pad_before, int64_t pad_after) {
  return (n + pad_before + pad_after - k) / stride + 1;
}

template <class T>
struct ConvFrameParams {
  const T* const* x = nullptr;  // d.kt frame pointers, each [ci, h, w] or null (zeros)
  const T* w = nullptr;         // [co, k()]
  const T* b = nullptr;         // [co] or null
  T* y = nullptr;               // [co, out_h, out_w] (overwritten)
  ConvFrameDims d{};
};

}  // namespace ms

namespace ms::cpu {

// Unfolds a band of output pixels at a time (im2col into a per-thread buffer of at most 64 MiB) and multiplies it
// with OpenBLAS; a 1x1x1 kernel at stride 1 multiplies the frame directly.
template <class T>
void conv3d_frame_forward(const ConvFrameParams<T>& p);

// The unfolded band's budget (8 MiB made the wide VAE decoders' GEMMs too narrow: docs/benchmarks.md) and the fewest
// output pixels a band takes (a narrower GEMM runs poorly).
inline constexpr int64_t kConvColBytes = int64_t(64) << 20;
inline constexpr int64_t kConvMinBand = 64;

// Output pixels per band for elements of `element` bytes: as many as kConvColBytes holds unfolded, at least
// kConvMinBand, at most the frame.
inline int64_t conv3d_band_pixels(const ConvFrameDims& d, int64_t element) {
  return std::min(d.out_h * d.out_w, std::max(kConvMinBand, kConvColBytes / element / d.k()));
}

// The bytes of the unfolded band conv3d_frame_forward<float> holds for d (a per-thread buffer that keeps its largest
// size); header-only, so that the GPU binaries count it without linking the CPU kernel.
inline int64_t conv3d_col_bytes(const ConvFrameDims& d) {
  return d.pointwise() ? 0 : conv3d_band_pixels(d, int64_t(sizeof(float))) * d.k() * int64_t(sizeof(float));
}

}  // namespace ms::cpu
