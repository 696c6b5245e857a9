#include <algorithm>

#include "backend/cuda/conv3d.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/vae_kernels.h"

namespace ms::cuda {
namespace {

constexpr int64_t kMinBand = 64;  // output pixels per band at least: narrower GEMMs run poorly
constexpr int kMaxFrames = 3;     // the VAE's kernels span at most 3 frames

struct FramePtrs {
  const float* f[kMaxFrames];
};

// col [K, n] for the output pixels [p0, p0 + n): row r = ((c kt + a) kh + e) kw + f holds tap (c, a, e, f) of every
// pixel, read from the nearest-upsampled frame a, zero outside it (ops/conv3d.h).
__global__ void unfold_kernel(FramePtrs x, ConvFrameDims d, int64_t p0, int64_t n, float* col) {
  const int64_t taps = d.kt * d.kh * d.kw, total = d.ci * taps * n;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = idx / n, p = p0 + idx % n;
    const int64_t c = r / taps, a = r / (d.kh * d.kw) % d.kt, e = r / d.kw % d.kh, f = r % d.kw;
    const int64_t sr = p / d.out_w * d.stride + e - d.pad_top, sc = p % d.out_w * d.stride + f - d.pad_left;
    const float* frame = x.f[a];
    float v = 0.f;
    if (frame && sr >= 0 && sr < d.up * d.h && sc >= 0 && sc < d.up * d.w)
      v = frame[(c * d.h + sr / d.up) * d.w + sc / d.up];
    col[idx] = v;
  }
}

}  // namespace

int64_t conv3d_col_floats(const ConvFrameDims& d, int64_t budget) {
  const int64_t pixels = d.out_h * d.out_w;
  return d.k() * std::min(pixels, std::max(kMinBand, budget / d.k()));
}

void conv3d_frame_forward(GemmContext& gemm, const float* const* x, const float* w, const float* b, float* y,
                          const ConvFrameDims& d, float* col, int64_t col_floats, Stream stream) {
  MS_CHECK(d.ci > 0 && d.co > 0 && d.kt > 0 && d.kt <= kMaxFrames && d.kh > 0 && d.kw > 0 && d.h > 0 && d.w > 0 &&
               d.up > 0 && d.stride > 0 && d.out_h > 0 && d.out_w > 0,
           "cuda::conv3d_frame_forward: bad dims");
  const int64_t pixels = d.out_h * d.out_w, K = d.k();
  fill_rows(y, b, d.co, pixels, stream);  // the bias, then the products added
  const bool pointwise = d.kt == 1 && d.kh == 1 && d.kw == 1 && d.up == 1 && d.stride == 1 && d.pad_top == 0 &&
                         d.pad_left == 0 && d.out_h == d.h && d.out_w == d.w;
  if (pointwise) {
    if (x[0]) gemm.gemm<float>(false, false, d.co, pixels, K, 1.0f, w, K, x[0], pixels, 1.0f, y, pixels, stream);
    return;
  }
  const int64_t band = std::min(pixels, col_floats / K);
  MS_CHECK(band >= std::min(pixels, kMinBand), "cuda::conv3d_frame_forward: col holds ", col_floats,
           " floats, less than ", K, " x ", std::min(pixels, kMinBand));
  FramePtrs frames{};
  for (int64_t a = 0; a < d.kt; ++a) frames.f[a] = x[a];
  for (int64_t p0 = 0; p0 < pixels; p0 += band) {
    const int64_t n = std::min(band, pixels - p0);
    unfold_kernel<<<elementwise_blocks(K * n), 256, 0, stream>>>(frames, d, p0, n, col);
    MS_CUDA_CHECK_LAUNCH();
    gemm.gemm<float>(false, false, d.co, n, K, 1.0f, w, K, col, n, 1.0f, y + p0, pixels, stream);
  }
}

}  // namespace ms::cuda
