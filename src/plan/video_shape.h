// From a video in pixels to the model's latent extents and token count: the VAE compresses time by st and space by
// sh, sw (Wan's VAE: 4, 8, 8 with 4n+1 frames: the first frame is coded alone), then the DiT patches by pt, ph, pw.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/dims.h"

namespace ms {

struct VideoShape {
  int64_t batch = 1;
  int64_t frames = 81, height = 480, width = 832;  // pixels
  std::array<int64_t, 3> vae_stride{4, 8, 8};      // st, sh, sw
};

struct LatentShape {
  ModelDims dims;                  // latent extents F, H, W (padded) and the token grid
  int64_t height = 0, width = 0;   // pixel extents after padding up to a multiple of stride x patch
  std::vector<std::string> notes;  // what was padded, for the report
};

// Throws ms::Error for non-positive sizes or strides, and for a frame count that is not 1 + a multiple of a
// temporal stride above 1, naming the nearest valid counts.
LatentShape latent_shape(const ModelConfig& c, const VideoShape& v);

// Parses "st,sh,sw" (positive integers) for --vae-stride; `what` names the option in errors.
std::array<int64_t, 3> parse_triple(const std::string& text, const std::string& what);

}  // namespace ms
