#include "eval/warping_error.h"

#include <cmath>
#include <limits>
#include <opencv2/imgproc.hpp>

#include "core/check.h"

namespace ms {
namespace {

// Mean masked squared error of one pair, or NaN when the mask is empty.
double pair_error(const uint8_t* frame_t, const uint8_t* frame_next, const FlowField& f, const FlowField& b) {
  const int h = int(f.height), w = int(f.width);
  cv::Mat map_x(h, w, CV_32F), map_y(h, w, CV_32F);  // [h, w] where each pixel of frame t lands in t+1
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      map_x.at<float>(y, x) = float(x) + f.u(y, x);
      map_y.at<float>(y, x) = float(y) + f.v(y, x);
    }
  cv::Mat next, warped, b_at;  // [h, w, 3] f32 frame t+1; it and b [h, w, 2] sampled at map
  cv::Mat(h, w, CV_8UC3, const_cast<uint8_t*>(frame_next)).convertTo(next, CV_32FC3, 1.0 / 255.0);
  cv::remap(next, warped, map_x, map_y, cv::INTER_LINEAR, cv::BORDER_REPLICATE);
  cv::remap(cv::Mat(h, w, CV_32FC2, const_cast<float*>(b.uv.data())), b_at, map_x, map_y, cv::INTER_LINEAR,
            cv::BORDER_REPLICATE);
  double sum = 0;
  int64_t used = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const float mx = map_x.at<float>(y, x), my = map_y.at<float>(y, x);
      if (mx < 0 || my < 0 || mx > float(w - 1) || my > float(h - 1)) continue;
      const float fu = f.u(y, x), fv = f.v(y, x);
      const cv::Vec2f bb = b_at.at<cv::Vec2f>(y, x);
      const float du = fu + bb[0], dv = fv + bb[1];
      if (du * du + dv * dv > 0.01f * (fu * fu + fv * fv + bb[0] * bb[0] + bb[1] * bb[1]) + 0.5f) continue;
      const cv::Vec3f wp = warped.at<cv::Vec3f>(y, x);
      const uint8_t* p = frame_t + (int64_t(y) * w + x) * 3;
      double e = 0;
      for (int ch = 0; ch < 3; ++ch) {
        const double d = double(p[ch]) / 255.0 - double(wp[ch]);
        e += d * d;
      }
      sum += e / 3.0;
      ++used;
    }
  return used ? sum / double(used) : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

void WarpingError::add_pair(const uint8_t* frame_t, const uint8_t* frame_next, const PairFlow& flow) {
  const double e = pair_error(frame_t, frame_next, flow.forward, flow.backward);
  if (std::isnan(e)) return;  // pairs whose flow is nowhere consistent say nothing about warping
  sum_ += e;
  ++pairs_;
}

double WarpingError::value() const { return pairs_ ? sum_ / double(pairs_) : std::numeric_limits<double>::quiet_NaN(); }

}  // namespace ms
