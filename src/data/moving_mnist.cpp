#include "data/moving_mnist.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"
#include "data/frames.h"

namespace ms {

MovingMnist::MovingMnist(MnistDigits digits, int64_t frames, int64_t height, int64_t width, uint64_t seed)
    : digits_(std::move(digits)),
      frames_(frames > 0 ? frames : 20),
      height_(height > 0 ? height : MovingMnistClip::kCanvas),
      width_(width > 0 ? width : MovingMnistClip::kCanvas),
      seed_(seed) {
  if (digits_.rows != MovingMnistClip::kDigit || digits_.cols != MovingMnistClip::kDigit)
    MS_FAIL("Moving-MNIST needs 28x28 digits, the IDX file has ", digits_.rows, "x", digits_.cols);
}

MovingMnistClip MovingMnist::generate(int64_t index) const {
  constexpr int64_t C = MovingMnistClip::kCanvas, D = MovingMnistClip::kDigit, free = C - D;
  constexpr double step = 0.1;  // of the free range per frame
  Rng rng(seed_ * 0xd1b54a32d192ed03ull + uint64_t(index) * 0x9e3779b97f4a7c15ull + 1);
  MovingMnistClip clip;
  clip.canvas.assign(size_t(frames_ * C * C), 0);  // [frames, 64, 64]
  for (int d = 0; d < 2; ++d) {
    clip.digit[size_t(d)] = rng.below(digits_.count);
    double y = rng.uniform(), x = rng.uniform();  // in [0, 1]: fraction of the free range
    const double theta = rng.uniform(0.0, 6.283185307179586);
    double vy = std::sin(theta), vx = std::cos(theta);
    const uint8_t* img = digits_.pixels.data() + clip.digit[size_t(d)] * D * D;  // [28, 28]
    for (int64_t f = 0; f < frames_; ++f) {
      y += vy * step;
      x += vx * step;
      if (y <= 0) y = 0, vy = -vy;
      if (y >= 1) y = 1, vy = -vy;
      if (x <= 0) x = 0, vx = -vx;
      if (x >= 1) x = 1, vx = -vx;
      const int64_t top = int64_t(y * double(free)), left = int64_t(x * double(free));
      clip.pos[d].push_back({top, left});
      uint8_t* frame = clip.canvas.data() + f * C * C;
      for (int64_t r = 0; r < D; ++r)
        for (int64_t c = 0; c < D; ++c) {
          uint8_t& px = frame[(top + r) * C + left + c];
          px = std::max(px, img[r * D + c]);
        }
    }
  }
  return clip;
}

DataSample MovingMnist::get(int64_t index) {
  constexpr int64_t C = MovingMnistClip::kCanvas;
  const MovingMnistClip clip = generate(index);
  RgbVideo rgb;  // the canvas, grey replicated to RGB
  rgb.frames = frames_, rgb.height = C, rgb.width = C;
  rgb.rgb.resize(size_t(frames_ * C * C * 3));  // [frames, 64, 64, 3]
  for (size_t i = 0; i < clip.canvas.size(); ++i) std::fill_n(rgb.rgb.begin() + long(3 * i), 3, clip.canvas[i]);
  const std::vector<uint8_t> out = resize_crop(rgb, {height_, width_});  // [frames, H, W, 3]
  DataSample s;
  s.x0.resize(size_t(3 * frames_ * height_ * width_));  // [3, F, H, W]
  rgb_to_model(out.data(), frames_, height_, width_, s.x0.data());
  s.caption =
      cat("digits ", int(digits_.labels[size_t(clip.digit[0])]), " and ", int(digits_.labels[size_t(clip.digit[1])]));
  return s;
}

}  // namespace ms
