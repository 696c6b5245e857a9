#include "eval/video_metrics.h"

#include <limits>

#include "core/check.h"
#include "core/log.h"
#include "eval/dynamic_degree.h"
#include "eval/ssim.h"
#include "eval/subject_consistency.h"
#include "eval/temporal_flickering.h"
#include "eval/warping_error.h"

namespace ms {

std::vector<Metric> evaluate_video(const RgbVideo& v, std::optional<Direction> expected) {
  if (v.frames < 2) MS_FAIL("the video has ", v.frames, " frame(s); the metrics compare frames and need at least 2");
  double consistency = std::numeric_limits<double>::quiet_NaN();
  if (v.height >= kSsimWindow && v.width >= kSsimWindow)
    consistency = subject_consistency_ssim(v);
  else
    log_warn("frames of ", v.height, "x", v.width, " are smaller than SSIM's ", kSsimWindow, "x", kSsimWindow,
             " window: no subject_consistency_ssim");
  const VideoFlow flow = compute_video_flow(v);
  const DynamicDegree dyn = dynamic_degree(flow);
  std::vector<Metric> m{{"temporal_flickering", temporal_flickering(v)},
                        {"subject_consistency_ssim", consistency},
                        {"warping_error", warping_error(v, flow)},
                        {"dynamic_degree", dyn.dynamic ? 1.0 : 0.0},
                        {"dynamic_degree_score", dyn.score}};
  if (expected) m.push_back({"motion_direction_accuracy", motion_direction_accuracy(flow, *expected)});
  return m;
}

}  // namespace ms
