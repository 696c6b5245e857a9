#include "data/synthetic_shapes.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/check.h"
#include "core/rng.h"

namespace ms {
namespace {

constexpr std::array<ShapeColour, 10> kColours = {{{"red", {1, 0, 0}},
                                                   {"green", {0, 1, 0}},
                                                   {"blue", {0, 0, 1}},
                                                   {"yellow", {1, 1, 0}},
                                                   {"cyan", {0, 1, 1}},
                                                   {"magenta", {1, 0, 1}},
                                                   {"white", {1, 1, 1}},
                                                   {"orange", {1, 0.5f, 0}},
                                                   {"purple", {0.6f, 0, 1}},
                                                   {"pink", {1, 0.4f, 0.7f}}}};
constexpr size_t kDefaultColours = 7;  // the default data's; the rest are the new colours

enum class ShapeKind { circle, square, triangle };
constexpr std::array<const char*, 3> kShapeNames = {"circle", "square", "triangle"};

struct Motion {
  const char* name;
  double dx, dy;  // unit step; y grows downwards (row 0 is the top of the frame)
};
constexpr std::array<Motion, 4> kMotions = {{{"left", -1, 0}, {"right", 1, 0}, {"up", 0, -1}, {"down", 0, 1}}};

constexpr int kSuper = 4;  // supersampling per axis: coverage in steps of 1/16

// Whether offset (u, v) from the centre, in units of the half-extent r, is inside the shape.
bool inside(ShapeKind kind, double u, double v) {
  switch (kind) {
    case ShapeKind::circle:
      return u * u + v * v <= 1.0;
    case ShapeKind::square:  // side sqrt(pi) r: the same area as the circle
      return std::fabs(u) <= 0.886 && std::fabs(v) <= 0.886;
    case ShapeKind::triangle:  // apex up at v = -1, base at v = +1 from u = -1 to 1
      return v <= 1.0 && std::fabs(u) <= 0.5 * (v + 1.0);
  }
  return false;
}

// The clip's own random stream: a bijective mix of (seed, index), so clips never share draws.
Rng clip_rng(uint64_t seed, int64_t index) {
  Rng mix(Rng(seed).next_u64() ^ uint64_t(index));
  return Rng(mix.next_u64());
}

}  // namespace

SyntheticShapes::SyntheticShapes(SyntheticShapesConfig cfg)
    : cfg_(cfg),
      colours_(cfg.new_colours ? std::span<const ShapeColour>(kColours).subspan(kDefaultColours)
                               : std::span<const ShapeColour>(kColours).first(kDefaultColours)) {
  if (cfg_.frames < 1) MS_FAIL("synthetic shapes: frames must be >= 1, got ", cfg_.frames);
  if (cfg_.height < 8) MS_FAIL("synthetic shapes: height must be >= 8 pixels, got ", cfg_.height);
  if (cfg_.width < 8) MS_FAIL("synthetic shapes: width must be >= 8 pixels, got ", cfg_.width);
  if (!(cfg_.radius > 0 && cfg_.radius < 0.5))
    MS_FAIL("synthetic shapes: radius must be in (0, 0.5) of the frame's smaller side, got ", cfg_.radius);
  if (!(cfg_.speed >= 0)) MS_FAIL("synthetic shapes: speed must be >= 0, got ", cfg_.speed);
}

const std::array<ShapeColour, 10>& shape_colours() { return kColours; }

int64_t SyntheticShapes::num_classes() const { return int64_t(colours_.size() * kShapeNames.size() * kMotions.size()); }

std::vector<std::string> SyntheticShapes::sample_captions() const {
  std::vector<std::string> captions;
  for (size_t i = 0; i < 4; ++i)
    captions.push_back(std::string(colours_[i % colours_.size()].name) + " " + kShapeNames[i % kShapeNames.size()] +
                       " moving " + kMotions[i].name);
  return captions;
}

VideoSample SyntheticShapes::get(int64_t index) const {
  MS_CHECK(index >= 0, "synthetic shapes: index must be >= 0, got ", index);
  const int64_t F = cfg_.frames, H = cfg_.height, W = cfg_.width;
  Rng rng = clip_rng(cfg_.seed, index);
  const ShapeColour& colour = colours_[size_t(rng.below(int64_t(colours_.size())))];
  const auto kind = ShapeKind(rng.below(int64_t(kShapeNames.size())));
  const Motion& motion = kMotions[rng.below(int64_t(kMotions.size()))];

  // Geometry in pixel units; pixel (y, x) covers [y, y+1) x [x, x+1).
  const double side = double(std::min(H, W)), r = cfg_.radius * side;
  const double along_extent = motion.dx != 0 ? double(W) : double(H);
  const double room = along_extent - 2.0 * r;  // distance the centre can travel while fully in frame
  const double speed = F > 1 ? std::min(cfg_.speed * side, room / double(F - 1)) : 0.0;
  const double travel = speed * double(F - 1);
  // Start so that the whole path stays in [r, extent - r] on both axes.
  double x0 = rng.uniform(r, double(W) - r), y0 = rng.uniform(r, double(H) - r);
  const double start_along = rng.uniform(r, r + room - travel);
  if (motion.dx > 0) x0 = start_along;
  if (motion.dx < 0) x0 = double(W) - start_along;
  if (motion.dy > 0) y0 = start_along;
  if (motion.dy < 0) y0 = double(H) - start_along;

  VideoSample s;
  s.caption = std::string(colour.name) + " " + kShapeNames[int(kind)] + " moving " + motion.name;
  s.video.assign(size_t(3 * F * H * W), -1.0f);  // [3, F, H, W]
  std::vector<float> coverage(size_t(H * W));    // [H, W] for the current frame
  for (int64_t f = 0; f < F; ++f) {
    const double cx = x0 + motion.dx * speed * double(f), cy = y0 + motion.dy * speed * double(f);
    // Only pixels touching the shape's bounding box can be covered.
    const int64_t y_lo = std::max<int64_t>(0, int64_t(std::floor(cy - r))),
                  y_hi = std::min<int64_t>(H, int64_t(std::ceil(cy + r)));
    const int64_t x_lo = std::max<int64_t>(0, int64_t(std::floor(cx - r))),
                  x_hi = std::min<int64_t>(W, int64_t(std::ceil(cx + r)));
    std::fill(coverage.begin(), coverage.end(), 0.0f);
    for (int64_t y = y_lo; y < y_hi; ++y) {
      for (int64_t x = x_lo; x < x_hi; ++x) {
        int hits = 0;
        for (int sy = 0; sy < kSuper; ++sy) {
          for (int sx = 0; sx < kSuper; ++sx) {
            const double px = double(x) + (sx + 0.5) / kSuper, py = double(y) + (sy + 0.5) / kSuper;
            hits += inside(kind, (px - cx) / r, (py - cy) / r);
          }
        }
        coverage[size_t(y * W + x)] = float(hits) / float(kSuper * kSuper);
      }
    }
    for (int64_t c = 0; c < 3; ++c) {
      float* plane = s.video.data() + (c * F + f) * H * W;  // [H, W]
      const float delta = 2.0f * colour.rgb[size_t(c)];     // colour in [-1, 1] minus background -1
      for (int64_t i = 0; i < H * W; ++i) plane[i] += coverage[size_t(i)] * delta;
    }
  }
  return s;
}

}  // namespace ms
