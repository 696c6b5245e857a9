#include "eval/ssim.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "core/check.h"

namespace ms {
namespace {

cv::Mat blur(const cv::Mat& m) {
  cv::Mat out;
  cv::GaussianBlur(m, out, cv::Size(kSsimWindow, kSsimWindow), kSsimSigma, kSsimSigma, cv::BORDER_REFLECT);
  return out;
}

// Mean SSIM of one channel pair [h, w] u8 over the windows wholly inside the frame.
double ssim_channel(const cv::Mat& a, const cv::Mat& b) {
  cv::Mat x, y;  // [h, w] f64
  a.convertTo(x, CV_64F);
  b.convertTo(y, CV_64F);
  const double c1 = (kSsimK1 * 255) * (kSsimK1 * 255), c2 = (kSsimK2 * 255) * (kSsimK2 * 255);
  const cv::Mat mx = blur(x), my = blur(y);
  const cv::Mat sxx = blur(x.mul(x)) - mx.mul(mx), syy = blur(y.mul(y)) - my.mul(my), sxy = blur(x.mul(y)) - mx.mul(my);
  const cv::Mat num = (2 * mx.mul(my) + c1).mul(2 * sxy + c2);
  const cv::Mat den = (mx.mul(mx) + my.mul(my) + c1).mul(sxx + syy + c2);
  cv::Mat map;  // [h, w]
  cv::divide(num, den, map);
  // The reflected border only changes windows reaching outside the frame; those are left out.
  const int r = kSsimWindow / 2;
  return cv::mean(map(cv::Rect(r, r, x.cols - 2 * r, x.rows - 2 * r)))[0];
}

}  // namespace

double ssim_rgb(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width) {
  if (height < kSsimWindow || width < kSsimWindow)
    MS_FAIL("SSIM needs frames of at least ", kSsimWindow, "x", kSsimWindow, " pixels, got ", height, "x", width);
  const int h = int(height), w = int(width);
  cv::Mat xs[3], ys[3];  // per channel [h, w] u8
  cv::split(cv::Mat(h, w, CV_8UC3, const_cast<uint8_t*>(a)), xs);
  cv::split(cv::Mat(h, w, CV_8UC3, const_cast<uint8_t*>(b)), ys);
  double sum = 0;
  for (int ch = 0; ch < 3; ++ch) sum += ssim_channel(xs[ch], ys[ch]);
  return sum / 3.0;
}

}  // namespace ms
