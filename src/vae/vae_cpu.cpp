// vae_model.h's passes on the CPU, in a file of their own: a binary that runs only another backend's ops (the lean
// GPU tests) then links neither the CPU ops nor BLAS.
#include "backend/cpu/vae_ops.h"
#include "vae/vae_model.h"

namespace ms {

void vae_encode(const VaeWeights& w, const float* video, int64_t frames, int64_t height, int64_t width, float* latents,
                const VaeChunking& chunking) {
  vae_encode(*cpu_vae_ops(w), video, frames, height, width, latents, chunking);
}

void vae_decode(const VaeWeights& w, const float* latents, int64_t latent_frames, int64_t height, int64_t width,
                float* video, const VaeChunking& chunking) {
  vae_decode(*cpu_vae_ops(w), latents, latent_frames, height, width, video, chunking);
}

}  // namespace ms
