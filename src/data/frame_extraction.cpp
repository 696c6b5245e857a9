#include "data/frame_extraction.h"

#include "core/check.h"

namespace ms {

std::vector<int64_t> clip_starts(const std::string& mode, int64_t frames, int64_t length, int64_t stride,
                                 int64_t samples) {
  MS_CHECK(length >= 1 && stride >= 1 && samples >= 1, "clip_starts: length ", length, ", stride ", stride,
           ", samples ", samples, " must be positive");
  std::vector<int64_t> starts;
  if (frames < length) return starts;
  const int64_t last = frames - length;  // latest possible start
  if (mode == "head") {
    starts.push_back(0);
  } else if (mode == "slide") {
    for (int64_t s = 0; s <= last; s += stride) starts.push_back(s);
  } else if (mode == "uniform") {
    for (int64_t k = 0; k < samples; ++k) {
      const int64_t s = samples == 1 ? 0 : k * last / (samples - 1);
      if (starts.empty() || s != starts.back()) starts.push_back(s);
    }
  } else {
    MS_FAIL("frame_extraction '", mode, "' is unknown; use head, uniform or slide");
  }
  return starts;
}

}  // namespace ms
