// Which clips a video of a given length yields (musubi-tuner's frame_extraction modes).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ms {

// First frames of the clips of `length` frames taken from a video of `frames` frames:
//   head:    {0}
//   slide:   0, stride, 2*stride, ... while start + length <= frames
//   uniform: `samples` starts evenly spaced over [0, frames - length]: floor(k * (frames - length) / (samples - 1))
//            for k = 0..samples-1 ({0} when samples = 1), duplicates dropped
// Empty when the video is shorter than `length`. mode must be head, slide or uniform.
std::vector<int64_t> clip_starts(const std::string& mode, int64_t frames, int64_t length, int64_t stride,
                                 int64_t samples);

}  // namespace ms
