// Writing a generated clip: pixel-space clips (3 channels) as video files through io/video.h; latents as video
// files through the VAE's decoder when there is one (vae/), else as safetensors.
#pragma once
#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "io/video.h"
#include "vae/vae_model.h"

namespace ms {

// Where a clip of a model with `channels` input channels goes when `out` was asked for. Video
// extensions (.mp4 .webm .gif .mkv .avi) and .safetensors are accepted, anything else is an error
// naming them. A latent model without a VAE (decodes false) asked for a video gets `out` with the extension
// replaced by .safetensors, and a warning saying why.
std::string clip_output_path(const std::string& out, int64_t channels, bool decodes = false);

// Throws ms::Error when the VAE's latents (z_dim) are not the model's input (in_dim); what: "--vae 'FILE'".
void check_vae_decodes(const VaeConfig& vae, int64_t in_dim, const std::string& what);

// x [3, F, H, W] in [-1, 1] (shape.channels 3) -> 8-bit RGB frames: round((x + 1) * 127.5), clamped to [0, 255].
RgbVideo clip_to_rgb(const float* x, const DataShape& shape, double fps);

// x [C, F, H, W] (shape) as 8-bit RGB frames: a pixel clip (C = 3) as it is, latents decoded by vae (required then).
// chunking: how the VAE runs (its spatial tiles).
RgbVideo clip_video(const float* x, const DataShape& shape, double fps, VaeOps* vae = nullptr,
                    const VaeChunking& chunking = {});

// Writes x [C, F, H, W] (shape) to a path from clip_output_path: a video (C = 3, or latents decoded by vae when
// given), or a safetensors file with `latents` [1, C, F, H, W] f32 (the latents, even with a vae).
// chunking: how the VAE runs (its spatial tiles).
void write_clip(const std::string& path, const float* x, const DataShape& shape, double fps = 8, VaeOps* vae = nullptr,
                const VaeChunking& chunking = {});

}  // namespace ms
