#include "eval/subject_consistency.h"

#include <algorithm>

#include "core/check.h"
#include "eval/ssim.h"

namespace ms {

void SubjectConsistency::add_frame(const uint8_t* first, const uint8_t* prev, const uint8_t* frame, int64_t height,
                                   int64_t width) {
  const double to_prev = ssim_rgb(prev, frame, height, width);
  const double to_first = ssim_rgb(first, frame, height, width);
  sum_ += (std::max(0.0, to_prev) + std::max(0.0, to_first)) / 2.0;
  ++frames_;
}

double SubjectConsistency::value() const {
  if (frames_ == 0) MS_FAIL("subject consistency needs at least 2 frames");
  return sum_ / double(frames_);
}

}  // namespace ms
