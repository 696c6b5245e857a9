// VBench's subject consistency with SSIM in place of DINO feature similarity.
#pragma once
#include "io/video.h"

namespace ms {

// For every frame t >= 1: s_t = (max(0, SSIM(t-1, t)) + max(0, SSIM(0, t))) / 2 (VBench clamps each
// similarity at 0); the result is the mean of s_t over t = 1 .. frames-1. SSIM is eval/ssim.h's
// (per RGB channel, averaged). 1 for a still video. Needs >= 2 frames of at least 11x11 pixels.
double subject_consistency_ssim(const RgbVideo& v);

}  // namespace ms
