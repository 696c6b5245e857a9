// Dataset TOML parsing, frame extraction and resize/crop.
#include <gtest/gtest.h>

#include "core/check.h"
#include "core/rng.h"
#include "data/dataset_toml.h"
#include "data/frame_extraction.h"
#include "data/frames.h"
#include "temp_dir.h"
#include "test_util.h"

namespace ms::test {
namespace {

std::string toml_error(const std::string& text) {
  return error_of([&] { parse_dataset_toml(text, "/data/set.toml"); });
}

TEST(DatasetToml, GeneralKeysAndPerDatasetOverrides) {
  ::testing::internal::CaptureStderr();
  const DatasetFile f = parse_dataset_toml(R"(
[general]
resolution = [40, 24]
caption_extension = ".caption"
batch_size = 3
target_frames = 5
enable_bucket = true
colour = "red"

[[datasets]]
video_directory = "clips"
frame_extraction = "slide"
frame_stride = 2
num_repeats = 4

[[datasets]]
video_jsonl_file = "/abs/list.jsonl"
target_frames = [7]
resolution = [40, 24]
frame_extraction = "uniform"
frame_sample = 3
)",
                                           "/data/set.toml");
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("'enable_bucket' is not supported"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("unknown key 'colour'"), std::string::npos) << warnings;
  EXPECT_EQ(f.batch_size, 3);
  ASSERT_EQ(f.datasets.size(), 2u);
  const DatasetEntry& a = f.datasets[0];
  EXPECT_EQ(a.video_directory, "/data/clips");  // relative to the TOML's directory
  EXPECT_EQ(a.width, 40);
  EXPECT_EQ(a.height, 24);
  EXPECT_EQ(a.caption_extension, ".caption");
  EXPECT_EQ(a.target_frames, 5);
  EXPECT_EQ(a.frame_extraction, "slide");
  EXPECT_EQ(a.frame_stride, 2);
  EXPECT_EQ(a.num_repeats, 4);
  const DatasetEntry& b = f.datasets[1];
  EXPECT_EQ(b.video_jsonl_file, "/abs/list.jsonl");
  EXPECT_EQ(b.target_frames, 7);
  EXPECT_EQ(b.frame_extraction, "uniform");
  EXPECT_EQ(b.frame_sample, 3);
  EXPECT_EQ(b.num_repeats, 1);
  EXPECT_EQ(b.caption_extension, ".caption");  // from [general]
}

TEST(DatasetToml, ErrorsNameTheKeyAndTheFile) {
  const std::string src = "\n[[datasets]]\nvideo_directory = \"v\"\n";
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"[general]\nframe_stride = \"2\"" + src, "[general] key 'frame_stride' must be an integer, got a string"},
           {"[general]\nresolution = [64]" + src, "key 'resolution' must be [width, height]"},
           {"[general]\nresolution = [64, 0]" + src, "key 'resolution' is 0"},
           {"[general]\nframe_extraction = \"chunk\"" + src, "'chunk'; use head, uniform or slide"},
           {"[general]\ntarget_frames = [9, 17]" + src, "megaslide trains on one clip length"},
           {"[general]\nnum_repeats = 1.5" + src, "'num_repeats' must be an integer, got a float"},
           {"[[datasets]]\nvideo_directory = 3", "[[datasets]] #1 key 'video_directory' must be a string"},
           {"[[datasets]]\ntarget_frames = 4", "[[datasets]] #1 names no data"},
           {"[[datasets]]\nvideo_directory = \"a\"\nvideo_jsonl_file = \"b\"", "both video_directory and"},
           {"[general]\nbatch_size = 2", "has no [[datasets]] entries"},
           {"general = 3" + src, "'general' must be a table"},
           {"[general\nx = 1", "line 1"},
       }) {
    const std::string e = toml_error(c.text);
    EXPECT_NE(e.find("/data/set.toml"), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e;
  }
  TempDir dir;
  try {
    read_dataset_toml(dir.file("none.toml"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("none.toml' does not exist"), std::string::npos) << e.what();
  }
}

TEST(FrameExtraction, HandComputedStarts) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(clip_starts("head", 10, 4, 1, 1), V({0}));
  EXPECT_EQ(clip_starts("head", 3, 4, 1, 1), V());             // too short
  EXPECT_EQ(clip_starts("slide", 10, 4, 3, 1), V({0, 3, 6}));  // 9 + 4 > 10
  EXPECT_EQ(clip_starts("slide", 10, 4, 1, 1), V({0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(clip_starts("slide", 4, 4, 5, 1), V({0}));
  EXPECT_EQ(clip_starts("uniform", 20, 8, 1, 3), V({0, 6, 12}));     // 12 * k / 2
  EXPECT_EQ(clip_starts("uniform", 21, 8, 1, 4), V({0, 4, 8, 13}));  // floor(13 * k / 3)
  EXPECT_EQ(clip_starts("uniform", 10, 8, 1, 4), V({0, 1, 2}));      // 0, 0, 1, 2: duplicate dropped
  EXPECT_EQ(clip_starts("uniform", 10, 8, 1, 1), V({0}));
  EXPECT_THROW(clip_starts("chunk", 10, 4, 1, 1), Error);
}

TEST(Frames, CoverSizeKeepsAspect) {
  auto eq = [](Size2 a, Size2 b) { return a.height == b.height && a.width == b.width; };
  EXPECT_TRUE(eq(cover_size({100, 200}, {50, 50}), {50, 100}));
  EXPECT_TRUE(eq(cover_size({200, 100}, {50, 50}), {100, 50}));
  EXPECT_TRUE(eq(cover_size({27, 35}, {16, 16}), {16, 21}));  // 35 * 16 / 27 = 20.7
  EXPECT_TRUE(eq(cover_size({10, 10}, {30, 20}), {30, 30}));  // enlarging
  EXPECT_TRUE(eq(cover_size({24, 40}, {24, 40}), {24, 40}));
}

// A frame of random 2x2 blocks, 2*h x (2*w + 4): halving with area averaging gives the blocks
// (swscale's fixed point rounds: +-1), and the centre crop drops one block column on each side.
TEST(Frames, ResizeCropMatchesAPlainReference) {
  const int64_t h = 5, w = 7, frames = 2, bw = w + 2;
  Rng r(21);
  std::vector<uint8_t> blocks(size_t(frames * h * bw * 3));  // [frames, h, w + 2, 3]
  for (auto& b : blocks) b = uint8_t(r.below(256));
  RgbVideo v;
  v.frames = frames, v.height = 2 * h, v.width = 2 * bw;
  v.rgb.resize(size_t(frames * v.height * v.width * 3));
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < v.height; ++y)
      for (int64_t x = 0; x < v.width; ++x)
        for (int c = 0; c < 3; ++c)
          v.frame(f)[(y * v.width + x) * 3 + c] = blocks[size_t(((f * h + y / 2) * bw + x / 2) * 3 + c)];
  const std::vector<uint8_t> out = resize_crop(v, {h, w});
  ASSERT_EQ(out.size(), size_t(frames * h * w * 3));
  int worst = 0;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          worst = std::max(worst, std::abs(int(out[size_t(((f * h + y) * w + x) * 3 + c)]) -
                                           int(blocks[size_t(((f * h + y) * bw + x + 1) * 3 + c)])));
  EXPECT_LE(worst, 1);
  // Same size: a pure crop, exact; then the [-1, 1] channel-major layout.
  const std::vector<uint8_t> same = resize_crop(v, {v.height, v.width - 2});
  for (int64_t y = 0; y < v.height; ++y)
    for (int64_t i = 0; i < (v.width - 2) * 3; ++i)
      ASSERT_EQ(same[size_t(y * (v.width - 2) * 3 + i)], v.frame(0)[y * v.width * 3 + 3 + i]);
  std::vector<float> x(size_t(3 * frames * h * w));
  rgb_to_model(out.data(), frames, h, w, x.data());
  EXPECT_EQ(x[size_t(2 * frames * h * w + 1)], float(out[1 * 3 + 2]) / 127.5f - 1.0f);  // channel 2, pixel 1
}

}  // namespace
}  // namespace ms::test
