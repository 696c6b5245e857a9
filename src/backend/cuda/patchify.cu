#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/patchify.h"

namespace ms::cuda {
namespace {

// Calls f(v, t) for every element: v its index in the video [B, C, F, H, W], t in the tokens
// [B, L, C*pt*ph*pw] ordered (c, kt, kh, kw) when channel_first, else (kt, kh, kw, c). One thread per token
// element, so every v and every t is written by exactly one thread.
template <class Fn>
__global__ void patch_elements(PatchDims d, bool channel_first, Fn fn) {
  const int64_t h_ = d.H / d.ph, w_ = d.W / d.pw, L = (d.F / d.pt) * h_ * w_, K = d.pt * d.ph * d.pw, P = d.C * K;
  const int64_t n = d.B * L * P;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = t / P, e = t % P, b = row / L, l = row % L;
    const int64_t c = channel_first ? e / K : e % d.C, k = channel_first ? e % K : e / d.C;
    const int64_t kt = k / (d.ph * d.pw), kh = (k / d.pw) % d.ph, kw = k % d.pw;
    const int64_t f = l / (h_ * w_), h = (l / w_) % h_, w = l % w_;
    fn((((b * d.C + c) * d.F + f * d.pt + kt) * d.H + h * d.ph + kh) * d.W + w * d.pw + kw, t);
  }
}

template <class Fn>
void launch(const PatchDims& d, bool channel_first, Stream stream, Fn fn) {
  patch_elements<<<elementwise_blocks(d.B * d.tokens() * d.patch()), 256, 0, stream>>>(d, channel_first, fn);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void patchify_forward(const PatchifyParams<float, uint16_t>& p, Stream stream) {
  const float* latents = p.latents;
  uint16_t* patches = p.patches;
  const PatchDims& d = p.d;
  launch(d, true, stream, [=] __device__(int64_t v, int64_t t) { store(patches, t, latents[v]); });
}

void patchify_backward(const PatchifyParams<float, uint16_t>& p, Stream stream) {
  const uint16_t* dpatches = p.dpatches;
  float* dlatents = p.dlatents;
  const PatchDims& d = p.d;
  launch(d, true, stream, [=] __device__(int64_t v, int64_t t) { dlatents[v] = load(dpatches, t); });
}

void unpatchify_forward(const UnpatchifyParams<uint16_t, float>& p, Stream stream) {
  const uint16_t* tokens = p.tokens;
  float* video = p.video;
  const PatchDims& d = p.d;
  launch(d, false, stream, [=] __device__(int64_t v, int64_t t) { video[v] = load(tokens, t); });
}

void unpatchify_backward(const UnpatchifyParams<uint16_t, float>& p, Stream stream) {
  const float* dvideo = p.dvideo;
  uint16_t* dtokens = p.dtokens;
  const PatchDims& d = p.d;
  launch(d, false, stream, [=] __device__(int64_t v, int64_t t) { store(dtokens, t, dvideo[v]); });
}

}  // namespace ms::cuda
