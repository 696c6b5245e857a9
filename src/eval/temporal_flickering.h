// VBench's temporal flickering: how little consecutive frames differ, pixel by pixel.
#pragma once
#include <cstdint>

namespace ms {

// (255 - mean |x_t - x_{t+1}|) / 255, the mean over every pixel and RGB channel of a frame pair, then over the
// frames - 1 consecutive pairs. 1 for a still video.
class TemporalFlickering {
 public:
  // Consecutive frames a, b [height, width, 3].
  void add_pair(const uint8_t* a, const uint8_t* b, int64_t height, int64_t width);
  double value() const;  // needs a pair

 private:
  double sum_pair_means_ = 0;
  int64_t pairs_ = 0;
};

}  // namespace ms
