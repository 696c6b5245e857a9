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

}  // namespace ms

namespace ms::cpu {

// latents [B, C, F, H, W] -> patches [B, L, C*pt*ph*pw] with patch elements ordered (c, kt, kh, kw),
// matching patch_embedding.weight [dim, C, pt, ph, pw] flattened: the conv is then a linear layer.
template <class T>
void patchify_forward(const T* latents, T* patches, const PatchDims& d);
// Inverts patchify_forward: dlatents (overwritten) from dpatches.
template <class T>
void patchify_backward(const T* dpatches, T* dlatents, const PatchDims& d);

// Head output tokens [B, L, pt*ph*pw*C] with elements ordered (kt, kh, kw, c) (Wan's unpatchify)
// -> video [B, C, F, H, W].
template <class T>
void unpatchify_forward(const T* tokens, T* video, const PatchDims& d);
// Inverts unpatchify_forward: dtokens (overwritten) from dvideo.
template <class T>
void unpatchify_backward(const T* dvideo, T* dtokens, const PatchDims& d);

}  // namespace ms::cpu
