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
debug_dataset = true
colour = "red"

[[datasets]]
video_directory = "clips"
frame_extraction = "slide"
frame_stride = 2
num_repeats = 4
batch_size = 2
source_fps = 29.97

[[datasets]]
video_jsonl_file = "/abs/list.jsonl"
target_frames = [1, 7]
resolution = 32
frame_extraction = "full"
max_frames = 45
frame_sample = 3
)",
                                           "/data/set.toml");
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("'debug_dataset' changes nothing"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("unknown key 'colour'"), std::string::npos) << warnings;
  ASSERT_EQ(f.datasets.size(), 2u);
  const DatasetEntry& a = f.datasets[0];
  EXPECT_EQ(a.video_directory, "/data/clips");  // relative to the TOML's directory
  EXPECT_EQ(a.width, 40);
  EXPECT_EQ(a.height, 24);
  EXPECT_EQ(a.caption_extension, ".caption");
  EXPECT_EQ(a.target_frames, std::vector<int64_t>{5});
  EXPECT_EQ(a.frame_extraction, "slide");
  EXPECT_EQ(a.frame_stride, 2);
  EXPECT_EQ(a.num_repeats, 4);
  EXPECT_EQ(a.batch_size, 2);
  EXPECT_EQ(a.source_fps, 29.97);
  EXPECT_TRUE(a.enable_bucket);
  EXPECT_FALSE(a.bucket_no_upscale);
  const DatasetEntry& b = f.datasets[1];
  EXPECT_EQ(b.video_jsonl_file, "/abs/list.jsonl");
  EXPECT_EQ(b.target_frames, (std::vector<int64_t>{1, 7}));
  EXPECT_EQ(b.width, 32);  // one integer: a square
  EXPECT_EQ(b.height, 32);
  EXPECT_EQ(b.frame_extraction, "full");
  EXPECT_EQ(b.max_frames, 45);
  EXPECT_EQ(b.frame_sample, 3);
  EXPECT_EQ(b.num_repeats, 1);
  EXPECT_EQ(b.batch_size, 3);                  // from [general]
  EXPECT_EQ(b.source_fps, 0);                  // not given: frames used as they are
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
           {"[general]\nframe_extraction = \"chunky\"" + src, "'chunky'; use head, chunk, slide, uniform or full"},
           {"[general]\ntarget_frames = []" + src, "is an empty list"},
           {"[general]\nsource_fps = \"30\"" + src, "'source_fps' must be a number"},
           {"[general]\nenable_bucket = 1" + src, "'enable_bucket' must be true or false"},
           {"[[datasets]]\nimage_directory = \"img\"\nvideo_directory = \"v\"", "more than one of video_directory"},
           {"[[datasets]]\nvideo_directory = \"v\"\ncontrol_directory = \"c\"", "key 'control_directory' is not"},
           {"[general]\nnum_repeats = 1.5" + src, "'num_repeats' must be an integer, got a float"},
           {"[[datasets]]\nvideo_directory = 3", "[[datasets]] #1 key 'video_directory' must be a string"},
           {"[[datasets]]\ntarget_frames = 4", "[[datasets]] #1 names no data"},
           {"[[datasets]]\nvideo_directory = \"a\"\nvideo_jsonl_file = \"b\"", "more than one of video_directory"},
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

TEST(DatasetToml, CacheEntriesTakeKeysThatOnlyShapedTheCache) {
  const DatasetFile f = parse_dataset_toml(
      "[[datasets]]\nimage_directory = \"img\"\ncache_directory = \"cache\"\ncontrol_directory = \"c\"\n",
      "/data/set.toml");
  ASSERT_EQ(f.datasets.size(), 1u);
  EXPECT_EQ(f.datasets[0].cache_directory, "/data/cache");
}

// musubi-tuner's retrieve_latent_cache_batches, by hand.
TEST(FrameExtraction, HandComputedClips) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  auto clips = [](const std::string& mode, std::vector<int64_t> lengths, int64_t frames, int64_t stride = 1,
                  int64_t samples = 1, int64_t max_frames = 129) {
    V out;
    for (const ClipRange& c : clip_ranges({mode, std::move(lengths), stride, samples, max_frames}, frames))
      out.push_back({c.start, c.length});
    return out;
  };
  EXPECT_EQ(clips("head", {4}, 10), V({{0, 4}}));
  EXPECT_EQ(clips("head", {4}, 3), V());                          // too short
  EXPECT_EQ(clips("head", {1, 5, 13}, 10), V({{0, 1}, {0, 5}}));  // each length that fits
  EXPECT_EQ(clips("chunk", {4}, 10), V({{0, 4}, {4, 4}}));        // 8 + 4 > 10
  EXPECT_EQ(clips("chunk", {3, 5}, 10), V({{0, 3}, {3, 3}, {6, 3}, {0, 5}, {5, 5}}));
  EXPECT_EQ(clips("slide", {4}, 10, 3), V({{0, 4}, {3, 4}, {6, 4}}));  // 9 + 4 > 10
  EXPECT_EQ(clips("slide", {4}, 4, 5), V({{0, 4}}));
  EXPECT_EQ(clips("uniform", {8}, 20, 1, 3), V({{0, 8}, {6, 8}, {12, 8}}));          // 12 k / 2
  EXPECT_EQ(clips("uniform", {8}, 21, 1, 4), V({{0, 8}, {4, 8}, {8, 8}, {13, 8}}));  // int(13 k / 3)
  EXPECT_EQ(clips("uniform", {8}, 10, 1, 4), V({{0, 8}, {1, 8}, {2, 8}}));           // 0, 0.67, 1.33, 2: once each
  EXPECT_EQ(clips("full", {}, 50, 1, 1, 129), V({{0, 49}}));                         // 4k + 1
  EXPECT_EQ(clips("full", {}, 200, 1, 1, 45), V({{0, 45}}));
  EXPECT_EQ(clips("full", {}, 4, 1, 1, 129), V({{0, 1}}));
}

TEST(FrameExtraction, DropsFramesToTheTargetRate) {
  using V = std::vector<int64_t>;
  EXPECT_EQ(resampled_frames(10, 30, 16), V({0, 2, 4, 6, 8}));  // int(0.5333 i) changes at even i here
  EXPECT_EQ(resampled_frames(7, 32, 16), V({0, 2, 4, 6}));
  EXPECT_EQ(resampled_frames(5, 16, 16), V({0, 1, 2, 3, 4}));
  EXPECT_EQ(resampled_frames(6, 8, 16), V({0, 1, 2, 3, 4, 5}));  // a slower source keeps every frame
}

// musubi-tuner's BucketSelector for Wan (16-pixel steps), by hand: at 960x544 the buckets are (w, area / w) and
// (area / w, w) for w = 352 .. 736, rounded down to 16.
TEST(FrameExtraction, BucketResolutionsAsMusubi) {
  auto eq = [](Resolution a, Resolution b) { return a.width == b.width && a.height == b.height; };
  const Resolution r{960, 544};
  EXPECT_TRUE(eq(bucket_resolution({1920, 1080}, r, true, false), {960, 544}));  // 960 / 544 = 1.765 nearest 1.778
  EXPECT_TRUE(eq(bucket_resolution({1080, 1920}, r, true, false), {544, 960}));
  EXPECT_TRUE(eq(bucket_resolution({1000, 1000}, r, true, false), {720, 720}));  // 522240 / 720 = 725.3
  EXPECT_TRUE(eq(bucket_resolution({500, 300}, r, true, true), {496, 288}));     // no upscale: rounded down
  EXPECT_TRUE(eq(bucket_resolution({1920, 1080}, r, true, true), {960, 544}));   // larger: bucketed
  EXPECT_TRUE(eq(bucket_resolution({500, 300}, r, false, false), r));            // no buckets: the resolution
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
