// RGB frames to the model's input: aspect-preserving resize and centre crop (FFmpeg swscale),
// then [-1, 1] floats in channel-major layout.
#pragma once
#include <cstdint>
#include <vector>

#include "io/video.h"

namespace ms {

struct Size2 {
  int64_t height = 0, width = 0;
};

// The size `in` is scaled to so that it covers out (one side equal, the other >= out's), aspect kept.
Size2 cover_size(Size2 in, Size2 out);

// Scales every frame of v to cover_size (area averaging when shrinking, bilinear when enlarging),
// then crops the centre out.height x out.width (extra pixels split, the odd one on the right/bottom).
// Returns [frames, out.height, out.width, 3].
std::vector<uint8_t> resize_crop(const RgbVideo& v, Size2 out);

// rgb [frames, height, width, 3] bytes -> out [3, frames, height, width] floats, value / 127.5 - 1.
void rgb_to_model(const uint8_t* rgb, int64_t frames, int64_t height, int64_t width, float* out);

}  // namespace ms
