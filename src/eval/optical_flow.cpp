#include "eval/optical_flow.h"

#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>

#include "core/check.h"

namespace ms {
namespace {

cv::Mat gray(const uint8_t* rgb, int64_t height, int64_t width) {
  cv::Mat g;  // [H, W] u8
  cv::cvtColor(cv::Mat(int(height), int(width), CV_8UC3, const_cast<uint8_t*>(rgb)), g, cv::COLOR_RGB2GRAY);
  return g;
}

FlowField flow(cv::DISOpticalFlow& dis, const cv::Mat& from, const cv::Mat& to) {
  FlowField f;
  f.height = from.rows;
  f.width = from.cols;
  f.uv.resize(size_t(f.height * f.width * 2));
  cv::Mat uv(from.rows, from.cols, CV_32FC2, f.uv.data());  // writes into f.uv
  try {
    dis.calc(from, to, uv);
  } catch (const cv::Exception& e) {
    MS_FAIL("optical flow failed on frames of ", from.rows, "x", from.cols, " (", e.err,
            "); the flow metrics need frames at least 12 pixels wide or high");
  }
  MS_CHECK(uv.data == reinterpret_cast<uchar*>(f.uv.data()), "DIS reallocated the flow buffer");
  return f;
}

}  // namespace

PairFlow frame_pair_flow(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width) {
  cv::Ptr<cv::DISOpticalFlow> dis = cv::DISOpticalFlow::create(cv::DISOpticalFlow::PRESET_MEDIUM);
  const cv::Mat ga = gray(a, height, width), gb = gray(b, height, width);
  return {flow(*dis, ga, gb), flow(*dis, gb, ga)};
}

}  // namespace ms
