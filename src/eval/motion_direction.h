// Motion-direction accuracy for clips with a known motion (synthetic shapes "... moving left").
#pragma once
#include <optional>
#include <string>

#include "eval/optical_flow.h"

namespace ms {

enum class Direction { left, right, up, down };

const char* direction_name(Direction d);
// "left" | "right" | "up" | "down" (any case); nullopt otherwise.
std::optional<Direction> parse_direction(const std::string& s);
// The direction of the first "moving <direction>" in a caption (any case), e.g. "red circle moving left".
std::optional<Direction> direction_from_caption(const std::string& caption);

// Fraction of frame pairs whose mean forward flow over the frame points in `expected`: the larger of
// |mean u|, |mean v| picks the axis and its sign the direction (v grows downwards, so up is -v). A
// pair with zero mean flow matches nothing.
class MotionDirection {
 public:
  explicit MotionDirection(Direction expected) : expected_(expected) {}
  // The forward flow of one pair of consecutive frames.
  void add_pair(const FlowField& forward);
  double accuracy() const;  // needs a pair

 private:
  Direction expected_;
  int64_t hits_ = 0, pairs_ = 0;
};

}  // namespace ms
