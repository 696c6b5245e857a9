// Built-in synthetic video dataset: one coloured shape moving across a black frame, with a caption.
// Needs no files, so `megaslide train` runs anywhere; small enough that loss falls within minutes.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ms {

struct SyntheticShapesConfig {
  int64_t frames = 8, height = 32, width = 32;  // frames >= 1, height and width >= 8
  uint64_t seed = 0;
  // In units of min(height, width): the shape's half-extent (in (0, 0.5)) and its speed per frame (>= 0).
  double radius = 0.25, speed = 3.0 / 32.0;
  // The three colours the default data never shows (orange, purple, pink) instead of its seven: new data to
  // fine-tune a model of the default data on (docs/results.md).
  bool new_colours = false;
};

struct ShapeColour {
  const char* name;
  std::array<float, 3> rgb;  // [3] in [0, 1]
};
// Every colour a clip can have: the default data's red, green, blue, yellow, cyan, magenta, white, then the new
// colours' orange, purple, pink.
const std::array<ShapeColour, 10>& shape_colours();

struct VideoSample {
  std::vector<float> video;  // [3, frames, height, width] RGB in [-1, 1]; background exactly -1 (black)
  std::string caption;       // "<colour> <shape> moving <direction>", e.g. "red circle moving left"
};

// Clip contents: one shape (circle, square, triangle) of one colour (red, green, blue, yellow,
// cyan, magenta, white; or orange, purple, pink with new_colours), half-extent radius x min(height, width), moving
// left, right, up or down at speed x min(height, width) pixels per frame (1.5 pixels per frame at 16x16 by default;
// slower when the clip is too long to stay in frame), from a random sub-pixel start such that it stays fully in frame.
// Edges are anti-aliased by 4x4 supersampling: pixel = background + coverage * (colour - background).
class SyntheticShapes {
 public:
  explicit SyntheticShapes(SyntheticShapesConfig cfg);

  // Sample i is a pure function of (seed, i): the same index always gives the same clip.
  VideoSample get(int64_t index) const;

  // Number of distinct captions: colours x shapes x motions.
  int64_t num_classes() const;
  // Four captions of the data for samples, each colour, shape and motion different from the last: "red circle
  // moving left", "green square moving right", "blue triangle moving up", "yellow circle moving down" (with
  // new_colours: orange, purple, pink, orange).
  std::vector<std::string> sample_captions() const;

 private:
  SyntheticShapesConfig cfg_;
  std::span<const ShapeColour> colours_;  // the clips' colours: shape_colours()' first seven or last three
};

}  // namespace ms
