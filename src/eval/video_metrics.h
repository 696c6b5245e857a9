// Every metric of `megaslide eval` on one video, in a fixed order.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "eval/motion_direction.h"
#include "io/video.h"

namespace ms {

struct Metric {
  std::string name;
  double value;  // NaN when the video cannot give it (too small for SSIM, no consistent flow)
};

// temporal_flickering, subject_consistency_ssim, warping_error, dynamic_degree (1 dynamic, 0 static:
// averaged over videos it is VBench's fraction of dynamic videos), dynamic_degree_score (pixels per
// frame) and, when `expected` is given, motion_direction_accuracy. Optical flow is computed once.
// Needs >= 2 frames.
std::vector<Metric> evaluate_video(const RgbVideo& v, std::optional<Direction> expected);

}  // namespace ms
