#include "eval/video_metrics.h"

#include <limits>

#include "core/check.h"
#include "core/log.h"
#include "eval/ssim.h"

namespace ms {

VideoMetrics::VideoMetrics(std::optional<Direction> expected, std::optional<int> colour) {
  if (expected) direction_.emplace(*expected);
  if (colour) shapes_.emplace(colour);
}

void VideoMetrics::add_frame(const uint8_t* rgb, int64_t height, int64_t width) {
  const size_t bytes = size_t(height * width * 3);
  if (shapes_) shapes_->add_frame(rgb, height, width);
  if (frames_ == 0) {
    height_ = height, width_ = width;
    ssim_ = height >= kSsimWindow && width >= kSsimWindow;
    if (!ssim_)
      log_warn("frames of ", height, "x", width, " are smaller than SSIM's ", kSsimWindow, "x", kSsimWindow,
               " window: no subject_consistency_ssim");
    first_.assign(rgb, rgb + bytes);
  } else {
    MS_CHECK(height == height_ && width == width_, "frame ", frames_, " is ", height, "x", width, ", frame 0 ", height_,
             "x", width_);
    flicker_.add_pair(prev_.data(), rgb, height, width);
    if (ssim_) consistency_.add_frame(first_.data(), prev_.data(), rgb, height, width);
    const PairFlow flow = frame_pair_flow(prev_.data(), rgb, height, width);
    warping_.add_pair(prev_.data(), rgb, flow);
    dynamic_.add_pair(flow.forward);
    if (direction_) direction_->add_pair(flow.forward);
  }
  prev_.assign(rgb, rgb + bytes);
  ++frames_;
}

std::vector<Metric> VideoMetrics::finish() const {
  if (frames_ < 2) MS_FAIL("the video has ", frames_, " frame(s); the metrics compare frames and need at least 2");
  const DynamicDegree dyn = dynamic_.result();
  std::vector<Metric> m{
      {"temporal_flickering", flicker_.value()},
      {"subject_consistency_ssim", ssim_ ? consistency_.value() : std::numeric_limits<double>::quiet_NaN()},
      {"warping_error", warping_.value()},
      {"dynamic_degree", dyn.dynamic ? 1.0 : 0.0},
      {"dynamic_degree_score", dyn.score}};
  if (direction_) m.push_back({"motion_direction_accuracy", direction_->accuracy()});
  if (shapes_) {
    m.push_back({"colour_accuracy", shapes_->colour_accuracy()});
    m.push_back({"one_shape", shapes_->one_shape()});
  }
  return m;
}

}  // namespace ms
