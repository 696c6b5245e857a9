// Patch embedding input / head output re-layout (Wan: Conv3d with stride = kernel = patch, and unpatchify).
#pragma once
#include <cstdint>

namespace ms {

struct PatchDims {
  int64_t B, C;        // batch, channels
  int64_t F, H, W;     // latent extents (multiples of the patch)
  int64_t pt, ph, pw;  // patch size
  int64_t f() const { return F / pt; }
  int64_t h() const { return H / ph; }
  int64_t w() const { return W / pw; }
  int64_t tokens() const { return f() * h() * w(); }
  int64_t patch() const { return C * pt * ph * pw; }
};

// The forward re-lays latents into patches; the backward writes dlatents (overwritten) from dpatches. I = the
// latents' element type (the model's input), A = the patches' (the activations').
template <class I, class A = I>
struct PatchifyParams {
  const I* latents = nullptr;   // [B, C, F, H, W]
  A* patches = nullptr;         // [B, L, C*pt*ph*pw]
  const A* dpatches = nullptr;  // [B, L, C*pt*ph*pw]
  I* dlatents = nullptr;        // [B, C, F, H, W]
  PatchDims d{};
};

// The forward re-lays the head's tokens into video; the backward writes dtokens (overwritten) from dvideo.
template <class A, class I = A>
struct UnpatchifyParams {
  const A* tokens = nullptr;  // [B, L, pt*ph*pw*C]
  I* video = nullptr;         // [B, C, F, H, W]
  const I* dvideo = nullptr;  // [B, C, F, H, W]
  A* dtokens = nullptr;       // [B, L, pt*ph*pw*C]
  PatchDims d{};
};

}  // namespace ms

namespace ms::cpu {

// latents [B, C, F, H, W] -> patches [B, L, C*pt*ph*pw] with patch elements ordered (c, kt, kh, kw),
// matching patch_embedding.weight [dim, C, pt, ph, pw] flattened: the conv is then a linear layer.
template <class T>
void patchify_forward(const PatchifyParams<T>& p);
template <class T>
void patchify_backward(const PatchifyParams<T>& p);

// Head output tokens [B, L, pt*ph*pw*C] with elements ordered (kt, kh, kw, c) (Wan's unpatchify)
// -> video [B, C, F, H, W].
template <class T>
void unpatchify_forward(const UnpatchifyParams<T>& p);
template <class T>
void unpatchify_backward(const UnpatchifyParams<T>& p);

}  // namespace ms::cpu
