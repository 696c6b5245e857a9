// Moving-MNIST (Srivastava et al. 2015): two MNIST digits (28x28) bounce inside a 64x64 canvas.
// Each digit starts at a uniformly random position with a random direction; per frame it moves 0.1
// of the free range (64 - 28) along its direction, and on reaching an edge it stops there and its
// velocity on that axis flips. The canvas is the pixelwise maximum of the two digits.
// Caption: "digits <a> and <b>" with the labels. Grayscale is replicated to RGB so the pixel-space
// models train on it; clips of other sizes are resized / centre-cropped from the 64x64 canvas.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "data/mnist_idx.h"

namespace ms {

struct MovingMnistClip {
  static constexpr int64_t kCanvas = 64, kDigit = 28;
  std::array<int64_t, 2> digit{};              // indices into the MNIST images
  std::vector<std::array<int64_t, 2>> pos[2];  // per digit, per frame: (row, col) of its top-left corner
  std::vector<uint8_t> canvas;                 // [frames, 64, 64]
};

class MovingMnist : public OneShapeDataset {
 public:
  // frames, height, width: the clip size (any positive values; 0 takes 20 x 64 x 64).
  MovingMnist(MnistDigits digits, int64_t frames, int64_t height, int64_t width, uint64_t seed);

  DataShape shape() const override { return {3, frames_, height_, width_}; }
  DataSample get(int64_t index) override;

  // The clip of sample `index` on the 64x64 canvas: a pure function of (seed, index).
  MovingMnistClip generate(int64_t index) const;
  const MnistDigits& digits() const { return digits_; }

 private:
  MnistDigits digits_;
  int64_t frames_, height_, width_;
  uint64_t seed_;
};

}  // namespace ms
