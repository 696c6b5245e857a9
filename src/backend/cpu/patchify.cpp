#include "ops/patchify.h"

#include "core/parallel.h"

namespace ms::cpu {

namespace {

// Calls fn(video_index, token_element_index) for every element of video [B, C, F, H, W] and its
// place in tokens [B, L, C*pt*ph*pw], ordered (c, kt, kh, kw) when channel_first, else (kt, kh, kw, c).
// Parallel over tokens; each element is visited exactly once, so writes never collide.
template <class Fn>
void for_each_patch_element(const PatchDims& d, bool channel_first, Fn&& fn) {
  const int64_t h_ = d.h(), w_ = d.w(), L = d.tokens(), P = d.patch();
  const int64_t K = d.pt * d.ph * d.pw;  // spatial elements per patch
  parallel_for(
      d.B * L,
      [&](int64_t row) {
        const int64_t b = row / L, l = row % L;
        const int64_t f = l / (h_ * w_), h = (l / w_) % h_, w = l % w_;
        for (int64_t c = 0; c < d.C; ++c)
          for (int64_t kt = 0; kt < d.pt; ++kt)
            for (int64_t kh = 0; kh < d.ph; ++kh) {
              const int64_t v0 = (((b * d.C + c) * d.F + f * d.pt + kt) * d.H + h * d.ph + kh) * d.W + w * d.pw;
              for (int64_t kw = 0; kw < d.pw; ++kw) {
                const int64_t k = (kt * d.ph + kh) * d.pw + kw;
                fn(v0 + kw, row * P + (channel_first ? c * K + k : k * d.C + c));
              }
            }
      },
      4);
}

}  // namespace

template <class T>
void patchify_forward(const PatchifyParams<T>& p) {
  const T* latents = p.latents;
  T* patches = p.patches;
  const PatchDims& d = p.d;
  for_each_patch_element(d, true, [&](int64_t v, int64_t t) { patches[t] = latents[v]; });
}

template <class T>
void patchify_backward(const PatchifyParams<T>& p) {
  const T* dpatches = p.dpatches;
  T* dlatents = p.dlatents;
  const PatchDims& d = p.d;
  for_each_patch_element(d, true, [&](int64_t v, int64_t t) { dlatents[v] = dpatches[t]; });
}

template <class T>
void unpatchify_forward(const UnpatchifyParams<T>& p) {
  const T* tokens = p.tokens;
  T* video = p.video;
  const PatchDims& d = p.d;
  for_each_patch_element(d, false, [&](int64_t v, int64_t t) { video[v] = tokens[t]; });
}

template <class T>
void unpatchify_backward(const UnpatchifyParams<T>& p) {
  const T* dvideo = p.dvideo;
  T* dtokens = p.dtokens;
  const PatchDims& d = p.d;
  for_each_patch_element(d, false, [&](int64_t v, int64_t t) { dtokens[t] = dvideo[v]; });
}

template void patchify_forward<float>(const PatchifyParams<float>&);
template void patchify_forward<double>(const PatchifyParams<double>&);
template void patchify_backward<float>(const PatchifyParams<float>&);
template void patchify_backward<double>(const PatchifyParams<double>&);
template void unpatchify_forward<float>(const UnpatchifyParams<float>&);
template void unpatchify_forward<double>(const UnpatchifyParams<double>&);
template void unpatchify_backward<float>(const UnpatchifyParams<float>&);
template void unpatchify_backward<double>(const UnpatchifyParams<double>&);

}  // namespace ms::cpu
