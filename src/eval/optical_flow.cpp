#include "eval/optical_flow.h"

#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>

#include "core/check.h"

namespace ms {
namespace {

cv::Mat gray(const RgbVideo& v, int64_t t) {
  cv::Mat g;  // [H, W] u8
  cv::cvtColor(cv::Mat(int(v.height), int(v.width), CV_8UC3, const_cast<uint8_t*>(v.frame(t))), g, cv::COLOR_RGB2GRAY);
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

VideoFlow compute_video_flow(const RgbVideo& v) {
  if (v.frames < 2) MS_FAIL("optical flow needs at least 2 frames, the video has ", v.frames);
  cv::Ptr<cv::DISOpticalFlow> dis = cv::DISOpticalFlow::create(cv::DISOpticalFlow::PRESET_MEDIUM);
  VideoFlow out;
  cv::Mat prev = gray(v, 0);
  for (int64_t t = 1; t < v.frames; ++t) {
    cv::Mat next = gray(v, t);
    out.forward.push_back(flow(*dis, prev, next));
    out.backward.push_back(flow(*dis, next, prev));
    prev = next;
  }
  return out;
}

}  // namespace ms
