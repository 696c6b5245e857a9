#include "eval/dynamic_degree.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/check.h"

namespace ms {
namespace {

double pair_score(const FlowField& f) {
  std::vector<float> mag(size_t(f.height * f.width));  // [H * W] flow magnitudes
  for (size_t i = 0; i < mag.size(); ++i) mag[i] = std::hypot(f.uv[2 * i], f.uv[2 * i + 1]);
  const size_t top = std::max<size_t>(1, mag.size() / 20);
  std::nth_element(mag.begin(), mag.begin() + ptrdiff_t(top - 1), mag.end(), std::greater<float>());
  double sum = 0;
  for (size_t i = 0; i < top; ++i) sum += mag[i];
  return sum / double(top);
}

}  // namespace

DynamicDegree dynamic_degree(const VideoFlow& flow) {
  MS_CHECK(!flow.forward.empty(), "dynamic degree needs at least one frame pair");
  const FlowField& first = flow.forward.front();
  DynamicDegree d;
  d.threshold = 6.0 * double(std::min(first.height, first.width)) / 256.0;
  const double frames = double(flow.forward.size() + 1);
  d.needed_pairs = std::max<int64_t>(1, std::llround(4.0 * frames / 16.0));
  for (const FlowField& f : flow.forward) {
    const double s = pair_score(f);
    d.score += s / double(flow.forward.size());
    d.moving_pairs += s > d.threshold;
  }
  d.dynamic = d.moving_pairs >= d.needed_pairs;
  return d;
}

}  // namespace ms
