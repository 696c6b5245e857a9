// Flow warping error (Lai et al. 2018): how well frame t+1, warped back along the optical flow,
// reproduces frame t where the flow is trustworthy.
#pragma once
#include "eval/optical_flow.h"

namespace ms {

// For every consecutive pair (t, t+1) with forward flow f (t -> t+1) and backward flow b (t+1 -> t):
// pixel p of frame t is used when p + f(p) lies inside the frame and the flows agree there
// (Sundaram et al. 2010): |f(p) + b(p + f(p))|^2 <= 0.01 (|f(p)|^2 + |b(p + f(p))|^2) + 0.5, b
// sampled bilinearly. Its error is the mean over RGB of (frame_t(p) - frame_{t+1}(p + f(p)))^2 with
// values scaled to [0, 1] and frame t+1 sampled bilinearly. The pair's error is the mean over used
// pixels; the result is the mean over pairs that used any pixel (NaN when none did). 0 is perfect.
class WarpingError {
 public:
  // Consecutive frames [height, width, 3] of flow's size and the flow between them.
  void add_pair(const uint8_t* frame_t, const uint8_t* frame_next, const PairFlow& flow);
  double value() const;

 private:
  double sum_ = 0;
  int64_t pairs_ = 0;  // that used any pixel
};

}  // namespace ms
