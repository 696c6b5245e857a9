// VBench's temporal flickering: how little consecutive frames differ, pixel by pixel.
#pragma once
#include "io/video.h"

namespace ms {

// (255 - mean |x_t - x_{t+1}|) / 255, the mean over every pixel and RGB channel of a frame pair,
// then over the frames - 1 consecutive pairs. 1 for a still video. Needs >= 2 frames.
double temporal_flickering(const RgbVideo& v);

}  // namespace ms
