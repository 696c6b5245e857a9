#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/check.h"
#include "data/synthetic_shapes.h"
#include "data/text_embed.h"
#include "test_util.h"

namespace ms::test {
namespace {

struct Caption {
  std::string colour, shape, moving, direction;
};

Caption parse(const std::string& caption) {
  Caption c;
  std::istringstream in(caption);
  in >> c.colour >> c.shape >> c.moving >> c.direction;
  return c;
}

// Per-pixel "mass" above the background, summed over channels: video [3, F, H, W] -> frame f [H, W].
std::vector<double> frame_mass(const VideoSample& s, const SyntheticShapesConfig& cfg, int64_t f) {
  const int64_t F = cfg.frames, HW = cfg.height * cfg.width;
  std::vector<double> mass(size_t(HW), 0.0);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < HW; ++i) mass[size_t(i)] += double(s.video[size_t((c * F + f) * HW + i)]) + 1.0;
  return mass;
}

// Centroid (x, y) of a frame's mass, in pixels.
std::pair<double, double> centroid(const std::vector<double>& mass, int64_t H, int64_t W) {
  double m = 0, mx = 0, my = 0;
  for (int64_t y = 0; y < H; ++y)
    for (int64_t x = 0; x < W; ++x) {
      const double v = mass[size_t(y * W + x)];
      m += v, mx += v * (double(x) + 0.5), my += v * (double(y) + 0.5);
    }
  EXPECT_GT(m, 0.0) << "empty frame";
  return {mx / m, my / m};
}

double cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

}  // namespace

TEST(SyntheticShapes, SameIndexSameClipDifferentIndexDifferentClip) {
  const SyntheticShapesConfig cfg{.frames = 9, .height = 33, .width = 37, .seed = 5};
  const SyntheticShapes a(cfg), b(cfg);
  for (int64_t i : {0, 1, 17, 1000003}) {
    const VideoSample x = a.get(i), y = b.get(i);
    EXPECT_EQ(x.video, y.video) << "index " << i;  // bitwise: float == on every element
    EXPECT_EQ(x.caption, y.caption);
    EXPECT_NE(x.video, a.get(i + 1).video) << "index " << i;
  }
  SyntheticShapesConfig other = cfg;
  other.seed = 6;
  EXPECT_NE(a.get(3).video, SyntheticShapes(other).get(3).video);
}

TEST(SyntheticShapes, ShapeRangeAndCaptionVocabulary) {
  const SyntheticShapesConfig cfg{.frames = 9, .height = 33, .width = 37, .seed = 1};
  const SyntheticShapes data(cfg);
  std::set<std::string> captions;
  for (int64_t i = 0; i < 400; ++i) {
    const VideoSample s = data.get(i);
    ASSERT_EQ(s.video.size(), size_t(3 * 9 * 33 * 37));
    for (float v : s.video) ASSERT_TRUE(v >= -1.0f && v <= 1.0f) << v;
    const Caption c = parse(s.caption);
    EXPECT_EQ(c.moving, "moving") << s.caption;
    EXPECT_TRUE(std::set<std::string>({"circle", "square", "triangle"}).count(c.shape)) << s.caption;
    captions.insert(s.caption);
  }
  // 400 draws over num_classes() equally likely captions cover nearly all of them.
  EXPECT_GT(int64_t(captions.size()), data.num_classes() * 9 / 10);
}

TEST(SyntheticShapes, CaptionColourIsTheDominantColour) {
  // Channels that are lit for each colour name (R, G, B).
  const std::map<std::string, std::array<bool, 3>> lit = {
      {"red", {1, 0, 0}},  {"green", {0, 1, 0}},   {"blue", {0, 0, 1}},  {"yellow", {1, 1, 0}},
      {"cyan", {0, 1, 1}}, {"magenta", {1, 0, 1}}, {"white", {1, 1, 1}},
  };
  const SyntheticShapesConfig cfg{.frames = 5, .height = 24, .width = 20, .seed = 2};
  const SyntheticShapes data(cfg);
  const int64_t n = cfg.frames * cfg.height * cfg.width;
  for (int64_t i = 0; i < 60; ++i) {
    const VideoSample s = data.get(i);
    const std::string colour = parse(s.caption).colour;
    ASSERT_TRUE(lit.count(colour)) << "unknown colour in caption: " << s.caption;
    std::array<double, 3> energy{};  // [3] summed (value - background) per channel
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < n; ++k) energy[size_t(c)] += double(s.video[size_t(c * n + k)]) + 1.0;
    const double top = std::max({energy[0], energy[1], energy[2]});
    ASSERT_GT(top, 0.0) << s.caption;
    for (size_t c = 0; c < 3; ++c) EXPECT_EQ(energy[c] > 0.5 * top, lit.at(colour)[c]) << s.caption << " channel " << c;
  }
}

TEST(SyntheticShapes, NewColoursAreOnlyTheThreeTheDefaultDataNeverShows) {
  // Fully covered pixels hold the caption colour's RGB exactly (in [-1, 1]: 2 rgb - 1); edge pixels blend to black.
  const SyntheticShapesConfig cfg{.frames = 2, .height = 20, .width = 24, .seed = 8, .new_colours = true};
  const SyntheticShapes data(cfg);
  EXPECT_EQ(data.num_classes(), 3 * 3 * 4);
  std::set<std::string> seen;
  const int64_t n = cfg.frames * cfg.height * cfg.width;
  for (int64_t i = 0; i < 60; ++i) {
    const VideoSample s = data.get(i);
    const std::string colour = parse(s.caption).colour;
    seen.insert(colour);
    const auto it = std::find_if(shape_colours().begin(), shape_colours().end(),
                                 [&](const ShapeColour& c) { return colour == c.name; });
    ASSERT_NE(it, shape_colours().end()) << s.caption;
    int64_t full = 0;
    for (int64_t k = 0; k < n; ++k) {
      const float r = s.video[size_t(k)], g = s.video[size_t(n + k)], b = s.video[size_t(2 * n + k)];
      if (std::fabs(r - (2 * it->rgb[0] - 1)) < 1e-6f && std::fabs(g - (2 * it->rgb[1] - 1)) < 1e-6f &&
          std::fabs(b - (2 * it->rgb[2] - 1)) < 1e-6f)
        ++full;
    }
    EXPECT_GT(full, 10) << s.caption;
  }
  EXPECT_EQ(seen, std::set<std::string>({"orange", "purple", "pink"}));
  for (const std::string& caption : data.sample_captions()) EXPECT_TRUE(seen.count(parse(caption).colour)) << caption;
}

TEST(SyntheticShapes, CentroidMovesInTheCaptionedDirection) {
  for (const SyntheticShapesConfig cfg : {SyntheticShapesConfig{.frames = 9, .height = 33, .width = 37, .seed = 3},
                                          SyntheticShapesConfig{.frames = 8, .height = 32, .width = 32, .seed = 0},
                                          SyntheticShapesConfig{.frames = 50, .height = 8, .width = 11, .seed = 4}}) {
    const SyntheticShapes data(cfg);
    std::set<std::string> seen;
    for (int64_t i = 0; i < 40; ++i) {
      const VideoSample s = data.get(i);
      const std::string dir = parse(s.caption).direction;
      seen.insert(dir);
      const auto [x0, y0] = centroid(frame_mass(s, cfg, 0), cfg.height, cfg.width);
      const auto [x1, y1] = centroid(frame_mass(s, cfg, cfg.frames - 1), cfg.height, cfg.width);
      const double dx = x1 - x0, dy = y1 - y0;
      const double along = dir == "left" ? -dx : dir == "right" ? dx : dir == "up" ? -dy : dir == "down" ? dy : 0;
      const double across = dir == "left" || dir == "right" ? dy : dx;
      // At least 2 pixels of travel (~7-8 px for 8-9 frames at 32 px); translation keeps the other axis.
      EXPECT_GT(along, 2.0) << s.caption << " index " << i;
      EXPECT_LT(std::fabs(across), 0.25) << s.caption << " index " << i;
    }
    EXPECT_EQ(seen, std::set<std::string>({"left", "right", "up", "down"}));
  }
}

TEST(SyntheticShapes, RadiusAndSpeedAreTheConfigured) {
  // Closed forms (to the 4 x 4 supersampling): a circle's mass is 2 pi r^2 per unit of channel value (-1 -> 1), a
  // square's 2 (2 x 0.886 r)^2; each frame moves the centroid by speed x min(H, W) along the captioned axis.
  for (const auto& [radius, speed] : {std::pair{0.25, 3.0 / 32.0}, std::pair{0.15, 0.05}}) {
    const SyntheticShapesConfig cfg{
        .frames = 3, .height = 40, .width = 46, .seed = 11, .radius = radius, .speed = speed};
    const SyntheticShapes data(cfg);
    const double r = radius * 40, step = speed * 40;
    int64_t checked = 0;
    for (int64_t i = 0; i < 40; ++i) {
      const VideoSample s = data.get(i);
      const Caption c = parse(s.caption);
      const auto it = std::find_if(shape_colours().begin(), shape_colours().end(),
                                   [&](const ShapeColour& k) { return c.colour == k.name; });
      ASSERT_NE(it, shape_colours().end()) << s.caption;
      const double lit = double(it->rgb[0]) + it->rgb[1] + it->rgb[2];  // each channel's mass scales with its value
      double m = 0;
      for (double v : frame_mass(s, cfg, 1)) m += v;
      const double area = c.shape == "circle" ? M_PI * r * r : c.shape == "square" ? std::pow(2 * 0.886 * r, 2) : 0;
      if (area > 0) {
        EXPECT_NEAR(m, lit * 2 * area, 0.04 * m) << s.caption;  // edges resolved to 1/4 pixel
        ++checked;
      }
      const auto [x0, y0] = centroid(frame_mass(s, cfg, 0), cfg.height, cfg.width);
      const auto [x1, y1] = centroid(frame_mass(s, cfg, 1), cfg.height, cfg.width);
      EXPECT_NEAR(std::hypot(x1 - x0, y1 - y0), step, 0.05) << s.caption;
    }
    EXPECT_GT(checked, 10);
  }
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.radius = 0.5}), ms::Error);
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.radius = 0}), ms::Error);
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.speed = -0.1}), ms::Error);
}

TEST(SyntheticShapes, StaysInFrame) {
  // A long clip (speed capped so the path fits): mass per frame stays constant while the shape is
  // fully inside; 4x4 supersampling of a ~30-pixel shape varies it by ~1%, leaving the frame by far more.
  const SyntheticShapesConfig cfg{.frames = 80, .height = 25, .width = 41, .seed = 7};
  const SyntheticShapes data(cfg);
  for (int64_t i = 0; i < 20; ++i) {
    const VideoSample s = data.get(i);
    double first = 0;
    for (int64_t f = 0; f < cfg.frames; ++f) {
      double m = 0;
      for (double v : frame_mass(s, cfg, f)) m += v;
      if (f == 0) first = m;
      EXPECT_NEAR(m, first, 0.1 * first) << s.caption << " frame " << f;
    }
  }
}

TEST(SyntheticShapes, SingleFrameAndSmallestSize) {
  const SyntheticShapesConfig cfg{.frames = 1, .height = 8, .width = 8, .seed = 9};
  const VideoSample s = SyntheticShapes(cfg).get(0);
  EXPECT_EQ(s.video.size(), size_t(3 * 8 * 8));
  double m = 0;
  for (double v : frame_mass(s, cfg, 0)) m += v;
  EXPECT_GT(m, 0.0);
}

TEST(SyntheticShapes, BadConfigThrows) {
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.height = 0}), ms::Error);
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.width = 7}), ms::Error);
  EXPECT_THROW(SyntheticShapes(SyntheticShapesConfig{.frames = 0}), ms::Error);
  try {
    SyntheticShapes(SyntheticShapesConfig{.height = 0});
  } catch (const ms::Error& e) {
    EXPECT_NE(std::string(e.what()).find("height"), std::string::npos) << e.what();
  }
}

TEST(TextEmbed, DeterministicShapeAndZeroPadding) {
  const int64_t L = 8, D = 64;
  std::vector<float> a(L * D, 7.0f), b(L * D, -3.0f);  // [L, D]; garbage must be overwritten
  EXPECT_EQ(embed_caption("Red circle, moving LEFT!", L, D, a.data()), 4);
  EXPECT_EQ(embed_caption("Red circle, moving LEFT!", L, D, b.data()), 4);
  EXPECT_EQ(a, b);
  for (int64_t k = 4 * D; k < L * D; ++k) ASSERT_EQ(a[size_t(k)], 0.0f) << k;
  double sq = 0;
  for (int64_t k = 0; k < 4 * D; ++k) sq += double(a[size_t(k)]) * a[size_t(k)];
  EXPECT_NEAR(sq / double(4 * D), 1.0, 0.3);  // unit-variance word rows plus a small position term
  // Case and punctuation do not matter; empty captions give all-zero rows.
  std::vector<float> c(L * D);
  embed_caption("red circle moving left", L, D, c.data());
  EXPECT_EQ(a, c);
  EXPECT_EQ(embed_caption("  ,;  ", L, D, c.data()), 0);
  for (float v : c) ASSERT_EQ(v, 0.0f);
  // Long captions are cut at text_len.
  EXPECT_EQ(embed_caption("a b c d e f g h i j", 3, D, c.data()), 3);
}

TEST(TextEmbed, SameWordCorrelatedDifferentWordsNot) {
  const int64_t L = 6, D = 64;
  std::vector<float> a(L * D), b(L * D);  // [L, D] each
  embed_caption("red circle moving left", L, D, a.data());
  embed_caption("a small blue circle moving right", L, D, b.data());
  // "circle": row 1 of a, row 3 of b; "moving": row 2 of a, row 4 of b.
  EXPECT_GT(cosine(&a[1 * D], &b[3 * D], D), 0.85);
  EXPECT_GT(cosine(&a[2 * D], &b[4 * D], D), 0.85);
  // Same position, different words: "red" vs "a", "left" vs "circle" (row 3 of both).
  EXPECT_LT(std::fabs(cosine(&a[0], &b[0], D)), 0.3);
  EXPECT_LT(std::fabs(cosine(&a[3 * D], &b[3 * D], D)), 0.3);
  // Different words, different positions.
  const char* words[] = {"red", "green", "blue", "yellow", "circle", "square", "triangle", "left", "right", "up"};
  for (const char* w1 : words)
    for (const char* w2 : words) {
      if (std::string(w1) == w2) continue;
      std::vector<float> x(L * D), y(L * D);
      embed_caption(w1, L, D, x.data());
      embed_caption(std::string("the ") + w2, L, D, y.data());
      EXPECT_LT(std::fabs(cosine(&x[0], &y[D], D)), 0.3) << w1 << " vs " << w2;
    }
  // Word order matters: swapping two words changes the rows beyond a permutation.
  std::vector<float> s(L * D);
  embed_caption("circle red moving left", L, D, s.data());
  EXPECT_NE(std::vector<float>(s.begin(), s.begin() + D), std::vector<float>(a.begin() + D, a.begin() + 2 * D));
}

}  // namespace ms::test
