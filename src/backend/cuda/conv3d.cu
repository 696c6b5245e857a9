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
// pixel, read from the nearest-upsampled frame a, zero outside it (ops/conv3d.h). Rows go along the grid's y (the
// tap's indices found once per row), pixels along x in 32-bit arithmetic (a frame has far fewer than 2^31).
__global__ void unfold_kernel(FramePtrs x, ConvFrameDims d, int p0, int n, float* col) {
  const int64_t K = d.ci * d.kt * d.kh * d.kw;
  const int taps = int(d.kt * d.kh * d.kw), kh = int(d.kh), kw = int(d.kw), out_w = int(d.out_w),
            stride = int(d.stride), up = int(d.up), h = int(d.h), w = int(d.w);
  for (int64_t r = blockIdx.y; r < K; r += gridDim.y) {
    const int c = int(r / taps), a = int(r / (kh * kw) % d.kt), e = int(r / kw % kh), f = int(r % kw);
    const float* frame = x.f[a] ? x.f[a] + int64_t(c) * h * w : nullptr;
    float* dst = col + r * n;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < n; q += gridDim.x * blockDim.x) {
      const int p = p0 + q, i = p / out_w, j = p - i * out_w;
      const int sr = i * stride + e - int(d.pad_top), sc = j * stride + f - int(d.pad_left);
      dst[q] = frame && sr >= 0 && sr < up * h && sc >= 0 && sc < up * w ? frame[(sr / up) * w + sc / up] : 0.f;
    }
  }
}

}  // namespace

int64_t conv3d_col_floats(const ConvFrameDims& d, int64_t budget) {
  const int64_t pixels = d.out_h * d.out_w;
  return d.pointwise() ? 0 : d.k() * std::min(pixels, std::max(kMinBand, budget / d.k()));
}

void conv3d_frame_forward(GemmContext& gemm, const ConvFrameParams<float>& p, float* col, int64_t col_floats,
                          Stream stream) {
  const float* const* x = p.x;
  const float *w = p.w, *b = p.b;
  float* y = p.y;
  const ConvFrameDims& d = p.d;
  MS_CHECK(d.ci > 0 && d.co > 0 && d.kt > 0 && d.kt <= kMaxFrames && d.kh > 0 && d.kw > 0 && d.h > 0 && d.w > 0 &&
               d.up > 0 && d.stride > 0 && d.out_h > 0 && d.out_w > 0,
           "cuda::conv3d_frame_forward: bad dims");
  const int64_t pixels = d.out_h * d.out_w, K = d.k();
  fill_rows(y, b, d.co, pixels, stream);  // the bias, then the products added
  if (d.pointwise()) {
    if (x[0]) gemm.gemm<float>(false, false, d.co, pixels, K, 1.0f, w, K, x[0], pixels, 1.0f, y, pixels, stream);
    return;
  }
  const int64_t band = std::min(pixels, col_floats / K);
  MS_CHECK(band >= std::min(pixels, kMinBand), "cuda::conv3d_frame_forward: col holds ", col_floats,
           " floats, less than ", K, " x ", std::min(pixels, kMinBand));
  MS_CHECK(pixels < (int64_t(1) << 31), "cuda::conv3d_frame_forward: ", pixels, " output pixels, over 2^31");
  const dim3 grid(unsigned(std::min<int64_t>((band + 255) / 256, 64)), unsigned(std::min<int64_t>(K, 65535)));
  FramePtrs frames{};
  for (int64_t a = 0; a < d.kt; ++a) frames.f[a] = x[a];
  for (int64_t p0 = 0; p0 < pixels; p0 += band) {
    const int64_t n = std::min(band, pixels - p0);
    unfold_kernel<<<grid, 256, 0, stream>>>(frames, d, int(p0), int(n), col);
    MS_CUDA_CHECK_LAUNCH();
    gemm.gemm<float>(false, false, d.co, n, K, 1.0f, w, K, col, n, 1.0f, y + p0, pixels, stream);
  }
}

}  // namespace ms::cuda
