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

void DynamicDegreeCounter::add_pair(const FlowField& forward) {
  if (pairs_ == 0) threshold_ = 6.0 * double(std::min(forward.height, forward.width)) / 256.0;
  const double s = pair_score(forward);
  sum_scores_ += s;
  moving_pairs_ += s > threshold_;
  ++pairs_;
}

DynamicDegree DynamicDegreeCounter::result() const {
  MS_CHECK(pairs_ > 0, "dynamic degree needs at least one frame pair");
  DynamicDegree d;
  d.threshold = threshold_;
  d.score = sum_scores_ / double(pairs_);
  d.moving_pairs = moving_pairs_;
  d.needed_pairs = std::max<int64_t>(1, std::llround(4.0 * double(pairs_ + 1) / 16.0));
  d.dynamic = d.moving_pairs >= d.needed_pairs;
  return d;
}

}  // namespace ms
