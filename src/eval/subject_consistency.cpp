#include "eval/subject_consistency.h"

#include <algorithm>

#include "core/check.h"
#include "eval/ssim.h"

namespace ms {

double subject_consistency_ssim(const RgbVideo& v) {
  if (v.frames < 2) MS_FAIL("subject consistency needs at least 2 frames, the video has ", v.frames);
  double sum = 0;
  for (int64_t t = 1; t < v.frames; ++t) {
    const double prev = ssim_rgb(v.frame(t - 1), v.frame(t), v.height, v.width);
    const double first = ssim_rgb(v.frame(0), v.frame(t), v.height, v.width);
    sum += (std::max(0.0, prev) + std::max(0.0, first)) / 2.0;
  }
  return sum / double(v.frames - 1);
}

}  // namespace ms
