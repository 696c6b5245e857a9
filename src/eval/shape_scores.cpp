#include "eval/shape_scores.h"

#include <algorithm>
#include <cctype>
#include <opencv2/imgproc.hpp>
#include <sstream>
#include <vector>

#include "core/check.h"
#include "data/synthetic_shapes.h"

namespace ms {

std::optional<int> parse_shape_colour(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const auto& colours = shape_colours();
  for (size_t i = 0; i < colours.size(); ++i)
    if (lower == colours[i].name) return int(i);
  return std::nullopt;
}

std::optional<int> shape_colour_from_caption(const std::string& caption) {
  std::istringstream words(caption);
  for (std::string w; words >> w;)
    if (auto c = parse_shape_colour(w)) return c;
  return std::nullopt;
}

void ShapeScores::add_frame(const uint8_t* rgb, int64_t height, int64_t width) {
  ++frames_;
  cv::Mat fg(int(height), int(width), CV_8U);  // 1: foreground
  double sum[3] = {0, 0, 0};
  int64_t n = 0;
  for (int64_t i = 0; i < height * width; ++i) {
    const uint8_t* p = rgb + 3 * i;
    const bool on = std::max({p[0], p[1], p[2]}) >= 128;
    fg.data[i] = on;
    if (!on) continue;
    for (int c = 0; c < 3; ++c) sum[c] += p[c] / 255.0;
    ++n;
  }
  if (n == 0) return;
  if (colour_) {
    int nearest = 0;
    double best = 1e30;
    const auto& colours = shape_colours();
    for (size_t k = 0; k < colours.size(); ++k) {
      double d = 0;
      for (int c = 0; c < 3; ++c)
        d += (sum[c] / double(n) - colours[k].rgb[size_t(c)]) * (sum[c] / double(n) - colours[k].rgb[size_t(c)]);
      if (d < best) best = d, nearest = int(k);
    }
    colour_hits_ += nearest == *colour_;
  }
  cv::Mat labels, stats, centroids;
  const int count = cv::connectedComponentsWithStats(fg, labels, stats, centroids, 8, CV_32S);
  int largest = 1;  // label 0 is the background
  for (int l = 2; l < count; ++l)
    if (stats.at<int>(l, cv::CC_STAT_AREA) > stats.at<int>(largest, cv::CC_STAT_AREA)) largest = l;
  const double area = stats.at<int>(largest, cv::CC_STAT_AREA);
  const double box = double(stats.at<int>(largest, cv::CC_STAT_WIDTH)) * stats.at<int>(largest, cv::CC_STAT_HEIGHT);
  shape_hits_ += area >= 0.9 * double(n) && area <= 0.25 * double(height * width) && area >= 0.4 * box;
}

double ShapeScores::colour_accuracy() const {
  MS_CHECK(colour_ && frames_ > 0, "colour_accuracy needs an expected colour and a frame");
  return double(colour_hits_) / double(frames_);
}

double ShapeScores::one_shape() const {
  MS_CHECK(frames_ > 0, "one_shape needs a frame");
  return double(shape_hits_) / double(frames_);
}

}  // namespace ms
