// Dense optical flow between two frames (OpenCV's DIS optical flow on grayscale), shared by
// the motion metrics: warping error, dynamic degree, motion direction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ms {

// Per-pixel displacement from one frame to another: pixel (x, y) of the source frame moves to
// (x + u, y + v) in the target frame; u grows rightwards, v downwards (row 0 is the top).
struct FlowField {
  int64_t height = 0, width = 0;
  std::vector<float> uv;  // [height, width, 2] (u, v) in pixels

  float u(int64_t y, int64_t x) const { return uv[size_t((y * width + x) * 2)]; }
  float v(int64_t y, int64_t x) const { return uv[size_t((y * width + x) * 2 + 1)]; }
};

// The flow both ways between two frames: forward a -> b, backward b -> a.
struct PairFlow {
  FlowField forward, backward;
};

// DIS (medium preset) on the grayscale of frames a, b [height, width, 3]. Throws for frames too small for it.
PairFlow frame_pair_flow(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width);

}  // namespace ms
