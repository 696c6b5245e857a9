#include "eval/temporal_flickering.h"

#include <cstdlib>

#include "core/check.h"

namespace ms {

double temporal_flickering(const RgbVideo& v) {
  if (v.frames < 2) MS_FAIL("temporal flickering needs at least 2 frames, the video has ", v.frames);
  const int64_t n = v.height * v.width * 3;  // values per frame
  double sum_pair_means = 0;
  for (int64_t t = 0; t + 1 < v.frames; ++t) {
    const uint8_t *a = v.frame(t), *b = v.frame(t + 1);
    int64_t sum = 0;  // exact: at most 255 per value
    for (int64_t i = 0; i < n; ++i) sum += std::abs(int(a[i]) - int(b[i]));
    sum_pair_means += double(sum) / double(n);
  }
  return (255.0 - sum_pair_means / double(v.frames - 1)) / 255.0;
}

}  // namespace ms
