// Video metrics against hand computations and plain float64 references, on small random clips of
// odd sizes (never zeros), and on pure translations of a textured image with known motion.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>

#include "cli_util.h"
#include "core/rng.h"
#include "data/synthetic_shapes.h"
#include "eval/dynamic_degree.h"
#include "eval/motion_direction.h"
#include "eval/optical_flow.h"
#include "eval/plot.h"
#include "eval/shape_scores.h"
#include "eval/ssim.h"
#include "eval/subject_consistency.h"
#include "eval/temporal_flickering.h"
#include "eval/video_metrics.h"
#include "eval/warping_error.h"
#include "io/video.h"
#include "temp_dir.h"
#include "train_util.h"

namespace ms {
namespace {

RgbVideo video_of(int64_t frames, int64_t height, int64_t width) {
  RgbVideo v;
  v.frames = frames, v.height = height, v.width = width, v.fps = 8;
  v.rgb.resize(size_t(frames * height * width * 3));
  return v;
}

// Values uniform in [1, 255].
RgbVideo random_rgb_video(int64_t frames, int64_t height, int64_t width, uint64_t seed) {
  RgbVideo v = video_of(frames, height, width);
  Rng r(seed);
  for (auto& x : v.rgb) x = uint8_t(1 + r.below(255));
  return v;
}

// b = a plus noise in [-100, 100], clamped: related but clearly different frames.
void perturb(const uint8_t* a, uint8_t* b, int64_t n, uint64_t seed) {
  Rng r(seed);
  for (int64_t i = 0; i < n; ++i) b[i] = uint8_t(std::clamp<int64_t>(int64_t(a[i]) + r.below(201) - 100, 1, 255));
}

// SSIM of one channel pair by direct summation in float64 over every 11x11 window wholly inside the
// frame (Wang et al. 2004), averaged over RGB.
double reference_ssim(const uint8_t* a, const uint8_t* b, int64_t h, int64_t w) {
  double g[11][11], gs = 0;
  for (int i = 0; i < 11; ++i)
    for (int j = 0; j < 11; ++j) gs += g[i][j] = std::exp(-((i - 5) * (i - 5) + (j - 5) * (j - 5)) / (2 * 1.5 * 1.5));
  const double c1 = std::pow(0.01 * 255, 2), c2 = std::pow(0.03 * 255, 2);
  double total = 0;
  for (int ch = 0; ch < 3; ++ch) {
    double sum = 0;
    int64_t windows = 0;
    for (int64_t y = 0; y + 11 <= h; ++y)
      for (int64_t x = 0; x + 11 <= w; ++x) {
        double ma = 0, mb = 0, saa = 0, sbb = 0, sab = 0;
        for (int i = 0; i < 11; ++i)
          for (int j = 0; j < 11; ++j) {
            const double wt = g[i][j] / gs, pa = a[((y + i) * w + x + j) * 3 + ch],
                         pb = b[((y + i) * w + x + j) * 3 + ch];
            ma += wt * pa, mb += wt * pb, saa += wt * pa * pa, sbb += wt * pb * pb, sab += wt * pa * pb;
          }
        saa -= ma * ma, sbb -= mb * mb, sab -= ma * mb;
        sum += (2 * ma * mb + c1) * (2 * sab + c2) / ((ma * ma + mb * mb + c1) * (saa + sbb + c2));
        ++windows;
      }
    total += sum / double(windows);
  }
  return total / 3;
}

// A smooth random texture [h, w] (grey levels 1..255): uniform noise, three 5x5 box blurs, stretched.
std::vector<double> texture(int64_t h, int64_t w, uint64_t seed) {
  Rng r(seed);
  std::vector<double> t(size_t(h * w));
  for (auto& x : t) x = r.uniform();
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<double> s(t.size());
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        double sum = 0;
        int n = 0;
        for (int64_t dy = -2; dy <= 2; ++dy)
          for (int64_t dx = -2; dx <= 2; ++dx)
            if (y + dy >= 0 && y + dy < h && x + dx >= 0 && x + dx < w) sum += t[size_t((y + dy) * w + x + dx)], ++n;
        s[size_t(y * w + x)] = sum / n;
      }
    t = s;
  }
  const auto [lo, hi] = std::minmax_element(t.begin(), t.end());
  const double a = *lo, b = *hi;
  for (auto& x : t) x = 1 + 254 * (x - a) / (b - a);
  return t;
}

// Frames cut from one texture, the content moving (dx, dy) whole pixels per frame; colour channels
// are the texture at three offsets so they differ.
RgbVideo translation(int64_t frames, int64_t h, int64_t w, int dx, int dy, uint64_t seed = 5) {
  const int64_t margin = (frames - 1) * std::max(std::abs(dx), std::abs(dy)) + 2, th = h + 2 * margin,
                tw = w + 2 * margin;
  const std::vector<double> tex = texture(th, tw, seed);
  RgbVideo v = video_of(frames, h, w);
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t ch = 0; ch < 3; ++ch) {
          const int64_t sy = y + margin - f * dy + ch, sx = x + margin - f * dx + ch;  // content at p moves to p + f d
          v.frame(f)[(y * w + x) * 3 + ch] = uint8_t(std::lround(tex[size_t(sy * tw + sx)]));
        }
  return v;
}

// Each metric fed the clip's frame pairs as `megaslide eval` feeds them (eval/video_metrics.cpp).
double temporal_flickering(const RgbVideo& v) {
  TemporalFlickering m;
  for (int64_t t = 0; t + 1 < v.frames; ++t) m.add_pair(v.frame(t), v.frame(t + 1), v.height, v.width);
  return m.value();
}

double subject_consistency_ssim(const RgbVideo& v) {
  SubjectConsistency m;
  for (int64_t t = 1; t < v.frames; ++t) m.add_frame(v.frame(0), v.frame(t - 1), v.frame(t), v.height, v.width);
  return m.value();
}

std::vector<PairFlow> video_flow(const RgbVideo& v) {
  std::vector<PairFlow> flow;  // [frames - 1]: pair (t, t + 1)
  for (int64_t t = 0; t + 1 < v.frames; ++t)
    flow.push_back(frame_pair_flow(v.frame(t), v.frame(t + 1), v.height, v.width));
  return flow;
}

double warping_error(const RgbVideo& v, const std::vector<PairFlow>& flow) {
  WarpingError m;
  for (int64_t t = 0; t + 1 < v.frames; ++t) m.add_pair(v.frame(t), v.frame(t + 1), flow[size_t(t)]);
  return m.value();
}

DynamicDegree dynamic_degree(const std::vector<PairFlow>& flow) {
  DynamicDegreeCounter m;
  for (const PairFlow& f : flow) m.add_pair(f.forward);
  return m.result();
}

double motion_direction_accuracy(const std::vector<PairFlow>& flow, Direction expected) {
  MotionDirection m(expected);
  for (const PairFlow& f : flow) m.add_pair(f.forward);
  return m.accuracy();
}

std::vector<Metric> evaluate_video(const RgbVideo& v, std::optional<Direction> expected) {
  VideoMetrics m(expected);
  for (int64_t t = 0; t < v.frames; ++t) m.add_frame(v.frame(t), v.height, v.width);
  return m.finish();
}

TEST(Eval, TemporalFlickeringByHand) {
  RgbVideo v = video_of(2, 1, 1);
  v.rgb = {10, 20, 30, 13, 17, 30};  // |d| = 3, 3, 0: mean 2
  EXPECT_DOUBLE_EQ(temporal_flickering(v), (255.0 - 2.0) / 255.0);
}

TEST(Eval, TemporalFlickeringMatchesPlainLoop) {
  const RgbVideo v = random_rgb_video(5, 7, 13, 1);
  double pairs = 0;
  for (int64_t t = 0; t + 1 < v.frames; ++t) {
    double s = 0;
    for (int64_t i = 0; i < v.height * v.width * 3; ++i)
      s += std::fabs(double(v.frame(t)[i]) - double(v.frame(t + 1)[i]));
    pairs += s / double(v.height * v.width * 3);
  }
  EXPECT_NEAR(temporal_flickering(v), (255.0 - pairs / 4.0) / 255.0, 1e-12);  // sums of integers: rounding only
}

TEST(Eval, SsimMatchesFloat64Reference) {
  RgbVideo v = random_rgb_video(2, 19, 23, 2);
  perturb(v.frame(0), v.frame(1), 19 * 23 * 3, 3);
  const double want = reference_ssim(v.frame(0), v.frame(1), 19, 23);
  ASSERT_GT(want, 0.2);  // a pair neither identical nor unrelated
  ASSERT_LT(want, 0.95);
  // OpenCV's separable f64 filter against direct summation: rounding of sums of ~10^5-sized terms.
  EXPECT_NEAR(ssim_rgb(v.frame(0), v.frame(1), 19, 23), want, 1e-9);
  EXPECT_NEAR(ssim_rgb(v.frame(0), v.frame(0), 19, 23), 1.0, 1e-12);
  EXPECT_THROW(ssim_rgb(v.frame(0), v.frame(1), 10, 40), Error);
}

TEST(Eval, SubjectConsistencyIsVBenchStructureOverSsim) {
  RgbVideo v = random_rgb_video(4, 13, 17, 4);
  const int64_t n = 13 * 17 * 3;
  for (int64_t t = 1; t < 4; ++t) perturb(v.frame(t - 1), v.frame(t), n, 10 + uint64_t(t));
  double want = 0;
  for (int64_t t = 1; t < 4; ++t)
    want += (std::max(0.0, reference_ssim(v.frame(t - 1), v.frame(t), 13, 17)) +
             std::max(0.0, reference_ssim(v.frame(0), v.frame(t), 13, 17))) /
            2;
  EXPECT_NEAR(subject_consistency_ssim(v), want / 3, 1e-9);
}

TEST(Eval, StillVideoScoresPerfectly) {
  RgbVideo v = translation(4, 33, 41, 0, 0);
  EXPECT_DOUBLE_EQ(temporal_flickering(v), 1.0);
  EXPECT_NEAR(subject_consistency_ssim(v), 1.0, 1e-12);
  const std::vector<PairFlow> flow = video_flow(v);
  EXPECT_LT(warping_error(v, flow), 1e-6);
  const DynamicDegree d = dynamic_degree(flow);
  EXPECT_FALSE(d.dynamic);
  EXPECT_LT(d.score, 0.05);
}

struct Motion {
  int dx, dy;
  Direction direction;
};
void PrintTo(const Motion& m, std::ostream* os) { *os << "shift (" << m.dx << ", " << m.dy << ")"; }

class TranslationClip : public ::testing::TestWithParam<Motion> {};

TEST_P(TranslationClip, FlowWarpingDirectionAndDynamics) {
  const Motion m = GetParam();
  const RgbVideo v = translation(5, 47, 61, m.dx, m.dy);
  const std::vector<PairFlow> flow = video_flow(v);
  ASSERT_EQ(flow.size(), 4u);
  // Flow magnitude away from the borders (where content enters the frame) is the shift.
  const double shift = std::hypot(m.dx, m.dy);
  for (const PairFlow& pair : flow) {
    const FlowField& f = pair.forward;
    double u = 0, w = 0;
    int64_t n = 0;
    for (int64_t y = 8; y < f.height - 8; ++y)
      for (int64_t x = 8; x < f.width - 8; ++x) u += f.u(y, x), w += f.v(y, x), ++n;
    EXPECT_NEAR(u / double(n), m.dx, 0.15);  // DIS on a smooth texture: sub-pixel accurate
    EXPECT_NEAR(w / double(n), m.dy, 0.15);
  }
  // Warping frame t+1 back along the flow reproduces frame t: compare with no motion compensation.
  double unwarped = 0;
  for (int64_t t = 0; t + 1 < v.frames; ++t)
    for (int64_t i = 0; i < v.height * v.width * 3; ++i)
      unwarped += std::pow((double(v.frame(t)[i]) - double(v.frame(t + 1)[i])) / 255.0, 2) /
                  double(v.height * v.width * 3 * (v.frames - 1));
  const double e = warping_error(v, flow);
  EXPECT_LT(e, 3e-5);  // measured ~1e-6..4e-6: sub-pixel flow error on a smooth texture
  EXPECT_LT(e, 0.01 * unwarped);
  EXPECT_DOUBLE_EQ(motion_direction_accuracy(flow, m.direction), 1.0);
  const Direction opposite = m.direction == Direction::left ? Direction::right : Direction::left;
  EXPECT_DOUBLE_EQ(motion_direction_accuracy(flow, opposite), 0.0);
  const DynamicDegree d = dynamic_degree(flow);
  EXPECT_NEAR(d.score, shift, 0.3);
  EXPECT_NEAR(d.threshold, 6.0 * 47 / 256, 1e-12);
  EXPECT_TRUE(d.dynamic);
}

INSTANTIATE_TEST_SUITE_P(Eval, TranslationClip,
                         ::testing::Values(Motion{2, 0, Direction::right}, Motion{-3, 0, Direction::left},
                                           Motion{0, -2, Direction::up}, Motion{0, 2, Direction::down}));

TEST(Eval, SlowMotionIsNotDynamic) {
  const DynamicDegree d = dynamic_degree(video_flow(translation(5, 47, 61, 1, 0)));
  EXPECT_NEAR(d.score, 1.0, 0.2);  // below the 1.1 pixel threshold at this size
  EXPECT_FALSE(d.dynamic);
}

TEST(Eval, DirectionFromCaption) {
  EXPECT_EQ(direction_from_caption("red circle moving left"), Direction::left);
  EXPECT_EQ(direction_from_caption("A Cat Moving Up."), Direction::up);
  EXPECT_EQ(direction_from_caption("moving sideways"), std::nullopt);
  EXPECT_EQ(direction_from_caption("still life"), std::nullopt);
  EXPECT_EQ(parse_direction("DOWN"), Direction::down);
  EXPECT_EQ(parse_direction("north"), std::nullopt);
}

TEST(Eval, EvaluateVideoNamesEveryMetric) {
  const auto m = evaluate_video(translation(3, 17, 19, 1, 0), Direction::right);
  std::vector<std::string> names;
  for (const auto& x : m) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"temporal_flickering", "subject_consistency_ssim", "warping_error",
                                             "dynamic_degree", "dynamic_degree_score", "motion_direction_accuracy"}));
  EXPECT_THROW(evaluate_video(random_rgb_video(1, 17, 19, 1), std::nullopt), Error);
  EXPECT_THROW(video_flow(random_rgb_video(2, 8, 8, 1)), Error);  // too small for DIS: an error, not a crash
}

bool is_png(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[8] = {};
  in.read(magic, 8);
  return in && std::string(magic + 1, 3) == "PNG";
}

TEST(Eval, PlotsWritePng) {
  test::TempDir dir;
  plot_lines(dir.file("lines.png"), "loss", "step", "loss",
             {{"a", {1, 2, 3, 4}, {1.0, 0.7, 0.5, 0.45}}, {"b", {1, 2, 3}, {0.9, NAN, 0.4}}});
  EXPECT_TRUE(is_png(dir.file("lines.png")));
  plot_bars(dir.file("bars.png"), {"x.mp4", "y.gif"}, {{"warping_error", {0.01, NAN}}, {"dynamic_degree", {1, 0}}});
  EXPECT_TRUE(is_png(dir.file("bars.png")));
  EXPECT_THROW(plot_lines(dir.file("none.png"), "t", "x", "y", {{"a", {1}, {NAN}}}), Error);
  EXPECT_THROW(plot_lines(dir.file("no/such/dir.png"), "t", "x", "y", {{"a", {1}, {2}}}), Error);
}

// The built-in shapes' own clips, at odd sizes, score 1 on both: the generator knows their colour and draws one shape.
// Frames with two shapes, speckles, a black frame or another colour score 0 where they should.
TEST(Eval, ShapeScoresOnTheShapesAndOnWhatIsNotOne) {
  for (const auto& [h, w] : {std::pair<int64_t, int64_t>{24, 24}, {17, 29}}) {
    SyntheticShapes data({.frames = 4, .height = h, .width = w, .seed = 5});
    for (int64_t i = 0; i < 20; ++i) {
      const VideoSample s = data.get(i);
      const std::optional<int> colour = shape_colour_from_caption(s.caption);
      ASSERT_TRUE(colour) << s.caption;
      ShapeScores ok(colour), wrong((*colour + 1) % 7);
      const int64_t plane = h * w;
      std::vector<uint8_t> rgb(size_t(plane * 3));  // [H, W, 3]
      for (int64_t f = 0; f < 4; ++f) {
        for (int64_t p = 0; p < plane; ++p)
          for (int64_t c = 0; c < 3; ++c)
            rgb[size_t(p * 3 + c)] = uint8_t(std::lround((s.video[size_t((c * 4 + f) * plane + p)] + 1) * 127.5));
        ok.add_frame(rgb.data(), h, w);
        wrong.add_frame(rgb.data(), h, w);
      }
      EXPECT_EQ(ok.colour_accuracy(), 1.0) << s.caption;
      EXPECT_EQ(ok.one_shape(), 1.0) << s.caption;
      EXPECT_EQ(wrong.colour_accuracy(), 0.0) << s.caption;
    }
  }
  const int64_t h = 20, w = 30;
  auto frame = [&](auto&& lit) {  // red wherever lit(y, x)
    std::vector<uint8_t> rgb(size_t(h * w * 3), 0);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        if (lit(y, x)) rgb[size_t((y * w + x) * 3)] = 255;
    return rgb;
  };
  Rng r(9);
  const std::vector<std::vector<uint8_t>> not_one{
      frame([](int64_t y, int64_t x) { return y >= 4 && y < 9 && ((x >= 2 && x < 7) || (x >= 20 && x < 25)); }),
      frame([&](int64_t, int64_t) { return r.below(10) == 0; }),          // speckles
      frame([](int64_t, int64_t) { return false; }),                      // black
      frame([](int64_t y, int64_t x) { return y < 15 && x < 25; }),       // fills more than a quarter
      frame([](int64_t y, int64_t x) { return y == x || y == x - 1; })};  // a thin diagonal: sparse in its box
  for (const auto& f : not_one) {
    ShapeScores s(0);
    s.add_frame(f.data(), h, w);
    EXPECT_EQ(s.one_shape(), 0.0);
  }
  ShapeScores one(0);
  one.add_frame(frame([](int64_t y, int64_t x) { return y >= 4 && y < 9 && x >= 2 && x < 7; }).data(), h, w);
  EXPECT_EQ(one.one_shape(), 1.0);
  EXPECT_EQ(one.colour_accuracy(), 1.0);
  EXPECT_EQ(parse_shape_colour("Magenta"), 5);
  EXPECT_EQ(shape_colour_from_caption("a cyan circle moving up"), 4);
  EXPECT_EQ(shape_colour_from_caption("a circle moving up"), std::nullopt);
}

// Read back with OpenCV, each frame of each clip lies on the sheet at the place and zoom the layout promises (72 px
// at least, an integer factor), every enlarged pixel the clip's own: clips of odd, different sizes, random bytes.
TEST(Eval, ContactSheetHoldsEveryFrameEnlarged) {
  test::TempDir dir;
  std::vector<RgbVideo> clips{random_rgb_video(3, 5, 7, 1), random_rgb_video(2, 9, 4, 2)};
  const ImageSize size = plot_contact_sheet(dir.file("sheet.png"), clips, {"first clip", "second"});
  const cv::Mat sheet = cv::imread(dir.file("sheet.png"), cv::IMREAD_COLOR);  // BGR
  ASSERT_EQ(sheet.cols, size.width);
  ASSERT_EQ(sheet.rows, size.height);
  int top = 6;  // the layout: 6 px margins, a 20 px caption line above each row, 2 px between frames
  for (const RgbVideo& v : clips) {
    const int zoom = int((72 + v.height - 1) / v.height);  // 15 for 5 rows, 8 for 9
    top += 20;
    for (int64_t f = 0; f < v.frames; ++f)
      for (int64_t y = 0; y < v.height * zoom; ++y)
        for (int64_t x = 0; x < v.width * zoom; ++x) {
          const uint8_t* want = v.frame(f) + ((y / zoom) * v.width + x / zoom) * 3;
          const cv::Vec3b got = sheet.at<cv::Vec3b>(int(top + y), int(6 + f * (v.width * zoom + 2) + x));
          ASSERT_TRUE(got[2] == want[0] && got[1] == want[1] && got[0] == want[2]) << f << " " << y << " " << x;
        }
    top += int(v.height) * zoom + 6;
  }
  EXPECT_EQ(sheet.rows, top);
  EXPECT_THROW(plot_contact_sheet(dir.file("x.png"), clips, {"one caption"}), Error);
}

TEST(EvalCli, JsonTablePlotAndCaptionDirection) {
  test::TempDir dir;
  encode_video(dir.file("right.avi"), translation(4, 48, 64, 2, 0));
  { std::ofstream(dir.file("right.txt")) << "a textured plane moving right\n"; }
  auto r = test::run_cli("eval --json " + dir.file("right.avi"));
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(j["frames"], 4);
  EXPECT_EQ(j["motion_direction_accuracy"], 1.0);  // from right.txt
  EXPECT_EQ(j["dynamic_degree"], 1.0);
  EXPECT_GT(j["temporal_flickering"].get<double>(), 0.5);
  r = test::run_cli("eval --expect-direction up --plot " + dir.file("m.png") + " " + dir.file("right.avi"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("motion_direction_accuracy"), std::string::npos) << r.output;
  EXPECT_TRUE(is_png(dir.file("m.png")));
  r = test::run_cli("eval --expect-direction sideways " + dir.file("right.avi"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("'sideways' is unknown"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ms
