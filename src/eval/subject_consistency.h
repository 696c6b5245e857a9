// VBench's subject consistency with SSIM in place of DINO feature similarity.
#pragma once
#include <cstdint>

namespace ms {

// For every frame t >= 1: s_t = (max(0, SSIM(t-1, t)) + max(0, SSIM(0, t))) / 2 (VBench clamps each similarity at
// 0); the result is the mean of s_t over t = 1 .. frames-1. SSIM is eval/ssim.h's (per RGB channel, averaged).
// 1 for a still video. Needs frames of at least 11x11 pixels.
class SubjectConsistency {
 public:
  // Frame t >= 1 with its predecessor and frame 0, each [height, width, 3].
  void add_frame(const uint8_t* first, const uint8_t* prev, const uint8_t* frame, int64_t height, int64_t width);
  double value() const;  // needs a frame after the first

 private:
  double sum_ = 0;
  int64_t frames_ = 0;  // added, after the first
};

}  // namespace ms
