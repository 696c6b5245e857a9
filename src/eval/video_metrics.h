// Every metric of `megaslide eval` on one video, in a fixed order, fed one frame at a time so that a long video
// never has to be held: only its first and previous frames are kept, and the optical flow of one pair.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "eval/dynamic_degree.h"
#include "eval/motion_direction.h"
#include "eval/shape_scores.h"
#include "eval/subject_consistency.h"
#include "eval/temporal_flickering.h"
#include "eval/warping_error.h"

namespace ms {

struct Metric {
  std::string name;
  double value;  // NaN when the video cannot give it (too small for SSIM, no consistent flow)
};

// temporal_flickering, subject_consistency_ssim, warping_error, dynamic_degree (1 dynamic, 0 static: averaged
// over videos it is VBench's fraction of dynamic videos), dynamic_degree_score (pixels per frame), with an expected
// direction motion_direction_accuracy, and with an expected shape colour (the clip is of the built-in shapes)
// colour_accuracy and one_shape (eval/shape_scores.h). Optical flow is computed once per pair.
class VideoMetrics {
 public:
  explicit VideoMetrics(std::optional<Direction> expected, std::optional<int> colour = std::nullopt);
  // The next frame [height, width, 3]; every frame of a video has the first one's size.
  void add_frame(const uint8_t* rgb, int64_t height, int64_t width);
  int64_t frames() const { return frames_; }
  // Needs >= 2 frames.
  std::vector<Metric> finish() const;

 private:
  int64_t frames_ = 0, height_ = 0, width_ = 0;
  bool ssim_ = false;                  // frames are at least SSIM's window
  std::vector<uint8_t> first_, prev_;  // [height, width, 3]
  TemporalFlickering flicker_;
  SubjectConsistency consistency_;
  WarpingError warping_;
  DynamicDegreeCounter dynamic_;
  std::optional<MotionDirection> direction_;
  std::optional<ShapeScores> shapes_;
};

}  // namespace ms
