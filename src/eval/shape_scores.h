// Scores for clips of the built-in synthetic shapes ("<colour> <shape> moving <direction>" on black): does each
// frame show the prompted colour, and does it show one compact shape? With motion_direction_accuracy they tell
// whether a model drew what it was asked for (docs/sampling_eval.md).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ms {

// The index in shape_colours() (data/synthetic_shapes.h) of a colour's name (any case), or of the first colour word
// of a caption; nullopt when there is none.
std::optional<int> parse_shape_colour(const std::string& name);
std::optional<int> shape_colour_from_caption(const std::string& caption);

// A frame's foreground is its pixels whose brightest channel is at least 128 (the shapes are drawn at full intensity
// on black). colour_accuracy: the fraction of frames whose foreground's mean colour is nearer the expected colour
// than any other of shape_colours(). one_shape: the fraction of frames whose foreground is one compact shape: its
// largest 8-connected component holds at least 90 % of the foreground pixels, covers at most a quarter of the frame
// and fills at least 40 % of its bounding box (a circle fills 79 %, a triangle 50 %).
class ShapeScores {
 public:
  explicit ShapeScores(std::optional<int> colour) : colour_(colour) {}
  // One frame [height, width, 3].
  void add_frame(const uint8_t* rgb, int64_t height, int64_t width);
  double colour_accuracy() const;  // needs an expected colour and a frame
  double one_shape() const;        // needs a frame

 private:
  std::optional<int> colour_;
  int64_t frames_ = 0, colour_hits_ = 0, shape_hits_ = 0;
};

}  // namespace ms
