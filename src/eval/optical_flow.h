// Dense optical flow between consecutive frames (OpenCV's DIS optical flow on grayscale), shared by
// the motion metrics: warping error, dynamic degree, motion direction.
#pragma once
#include <cstdint>
#include <vector>

#include "io/video.h"

namespace ms {

// Per-pixel displacement from one frame to another: pixel (x, y) of the source frame moves to
// (x + u, y + v) in the target frame; u grows rightwards, v downwards (row 0 is the top).
struct FlowField {
  int64_t height = 0, width = 0;
  std::vector<float> uv;  // [height, width, 2] (u, v) in pixels

  float u(int64_t y, int64_t x) const { return uv[size_t((y * width + x) * 2)]; }
  float v(int64_t y, int64_t x) const { return uv[size_t((y * width + x) * 2 + 1)]; }
};

struct VideoFlow {
  std::vector<FlowField> forward;   // [frames - 1]: frame t -> t + 1
  std::vector<FlowField> backward;  // [frames - 1]: frame t + 1 -> t
};

// Flow both ways between every pair of consecutive frames (DIS, medium preset). Needs >= 2 frames.
VideoFlow compute_video_flow(const RgbVideo& v);

}  // namespace ms
