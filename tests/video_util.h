// Random test clips for the video and dataset tests.
#pragma once
#include <cmath>
#include <fstream>
#include <string>

#include "core/rng.h"
#include "io/video.h"

namespace ms::test {

// A random smooth clip (what lossy codecs are made for; per-pixel noise is their worst case):
// per channel a sum of three random plane waves drifting over time, in 16..239.
inline RgbVideo smooth_clip(int64_t frames, int64_t height, int64_t width, uint64_t seed, double fps = 10) {
  Rng r(seed);
  RgbVideo v;
  v.frames = frames, v.height = height, v.width = width, v.fps = fps;
  v.rgb.resize(size_t(frames * height * width * 3));  // [frames, height, width, 3]
  double kx[3][3], ky[3][3], kt[3][3], ph[3][3];
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 3; ++k)
      kx[c][k] = r.uniform(-0.2, 0.2), ky[c][k] = r.uniform(-0.2, 0.2), kt[c][k] = r.uniform(-0.5, 0.5),
      ph[c][k] = r.uniform(0, 6.28);
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        for (int c = 0; c < 3; ++c) {
          double s = 0;
          for (int k = 0; k < 3; ++k)
            s += std::sin(kx[c][k] * double(x) + ky[c][k] * double(y) + kt[c][k] * double(f) + ph[c][k]);
          v.frame(f)[(y * width + x) * 3 + c] = uint8_t(std::lround(127.5 + 37.0 * s));
        }
  return v;
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace ms::test
