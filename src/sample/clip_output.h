// Writing a generated clip: pixel-space clips (3 channels) as video files through io/video.h,
// anything else (latents, which need a VAE to become pixels) as safetensors.
#pragma once
#include <cstdint>
#include <string>

#include "data/dataset.h"
#include "io/video.h"

namespace ms {

// Where a clip of a model with `channels` input channels goes when `out` was asked for. Video
// extensions (.mp4 .webm .gif .mkv .avi) and .safetensors are accepted, anything else is an error
// naming them. A latent model asked for a video gets `out` with the extension replaced by
// .safetensors, and a warning saying why (no VAE decoder here).
std::string clip_output_path(const std::string& out, int64_t channels);

// x [3, F, H, W] in [-1, 1] (shape.channels 3) -> 8-bit RGB frames: round((x + 1) * 127.5), clamped to [0, 255].
RgbVideo clip_to_rgb(const float* x, const DataShape& shape, double fps);

// Writes x [C, F, H, W] (shape) to a path from clip_output_path: a video (C = 3), or a safetensors
// file with `latents` [1, C, F, H, W] f32.
void write_clip(const std::string& path, const float* x, const DataShape& shape, double fps = 8);

}  // namespace ms
