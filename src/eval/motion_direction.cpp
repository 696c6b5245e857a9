#include "eval/motion_direction.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/check.h"

namespace ms {
namespace {

constexpr Direction kAll[] = {Direction::left, Direction::right, Direction::up, Direction::down};

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::optional<Direction> mean_direction(const FlowField& f) {
  double u = 0, v = 0;
  for (size_t i = 0; i < f.uv.size(); i += 2) {
    u += f.uv[i];
    v += f.uv[i + 1];
  }
  if (u == 0 && v == 0) return std::nullopt;
  if (std::fabs(u) >= std::fabs(v)) return u < 0 ? Direction::left : Direction::right;
  return v < 0 ? Direction::up : Direction::down;
}

}  // namespace

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::left:
      return "left";
    case Direction::right:
      return "right";
    case Direction::up:
      return "up";
    case Direction::down:
      return "down";
  }
  return "?";
}

std::optional<Direction> parse_direction(const std::string& s) {
  const std::string l = lower(s);
  for (Direction d : kAll)
    if (l == direction_name(d)) return d;
  return std::nullopt;
}

std::optional<Direction> direction_from_caption(const std::string& caption) {
  const std::string l = lower(caption);
  const std::string key = "moving ";
  const size_t at = l.find(key);
  if (at == std::string::npos) return std::nullopt;
  const size_t begin = at + key.size();
  size_t end = begin;
  while (end < l.size() && std::isalpha(static_cast<unsigned char>(l[end]))) ++end;
  return parse_direction(l.substr(begin, end - begin));
}

void MotionDirection::add_pair(const FlowField& forward) {
  hits_ += mean_direction(forward) == expected_;
  ++pairs_;
}

double MotionDirection::accuracy() const {
  MS_CHECK(pairs_ > 0, "motion direction needs at least one frame pair");
  return double(hits_) / double(pairs_);
}

}  // namespace ms
