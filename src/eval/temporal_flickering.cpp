#include "eval/temporal_flickering.h"

#include <cstdlib>

#include "core/check.h"

namespace ms {

void TemporalFlickering::add_pair(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width) {
  const int64_t n = height * width * 3;  // values per frame
  int64_t sum = 0;                       // exact: at most 255 per value
  for (int64_t i = 0; i < n; ++i) sum += std::abs(int(a[i]) - int(b[i]));
  sum_pair_means_ += double(sum) / double(n);
  ++pairs_;
}

double TemporalFlickering::value() const {
  if (pairs_ == 0) MS_FAIL("temporal flickering needs at least 2 frames");
  return (255.0 - sum_pair_means_ / double(pairs_)) / 255.0;
}

}  // namespace ms
