// Datasets: latent cache, video folders and JSONL lists, the bad-data policy, Moving-MNIST.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/check.h"
#include "core/rng.h"
#include "data/dataset.h"
#include "data/frames.h"
#include "data/moving_mnist.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train_util.h"
#include "video_util.h"

namespace ms::test {
namespace {

// The one clip shape of a dataset's batches.
DataShape only_shape(Dataset& d) {
  const std::vector<BatchShape> shapes = d.batch_shapes();
  EXPECT_EQ(shapes.size(), 1u);
  return shapes.front().shape;
}

void expect_shape(const DataShape& s, int64_t channels, int64_t frames, int64_t height, int64_t width) {
  EXPECT_EQ(s.channels, channels);
  EXPECT_EQ(s.frames, frames);
  EXPECT_EQ(s.height, height);
  EXPECT_EQ(s.width, width);
}

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = float(r.normal());
  return v;
}

// A latent cache file: latents [C, F, H, W], context [L, D] (f32), random.
void write_latents(const std::string& path, Shape lat, Shape ctx, uint64_t seed, bool poison = false) {
  std::vector<float> l = random_floats(numel(lat), seed), c = random_floats(numel(ctx), seed + 1);
  if (poison) l[l.size() / 2] = std::numeric_limits<float>::quiet_NaN();
  write_safetensors(path, {{"latents", DType::f32, lat, l.data()}, {"context", DType::f32, ctx, c.data()}});
}

std::string write_toml(const TempDir& dir, const std::string& body) {
  const std::string path = dir.file("data.toml");
  std::ofstream(path) << body;
  return path;
}

DataOptions latent_options(const std::string& toml) {
  DataOptions o;
  o.source = toml;
  o.in_dim = 4, o.text_len = 8, o.text_dim = 6;
  return o;
}

TEST(LatentCache, ReadsMegaslideFilesAndChecksTheModel) {
  QuietLogs quiet;
  TempDir dir;
  std::filesystem::create_directories(dir.file("cache"));
  write_latents(dir.file("cache/a.safetensors"), {4, 3, 6, 10}, {5, 6}, 1);
  write_latents(dir.file("cache/b.safetensors"), {4, 3, 6, 10}, {8, 6}, 2);
  write_latents(dir.file("cache/d.safetensors"), {4, 3, 6, 10}, {5, 6}, 4, true);  // NaN: bad when loaded
  const std::string toml = write_toml(dir, "[[datasets]]\ncache_directory = \"cache\"\nnum_repeats = 2\n");
  auto data = open_dataset(latent_options(toml));
  const DataShape s = only_shape(*data);
  expect_shape(s, 4, 3, 6, 10);
  const auto a_lat = random_floats(4 * 3 * 6 * 10, 1), a_ctx = random_floats(5 * 6, 2);
  bool saw_a = false;
  for (int64_t i = 0; i < 6; ++i) {  // one epoch: a, b, d twice each; d is replaced by the next good item
    const DataSample x = data->get(i);
    ASSERT_EQ(x.x0.size(), size_t(4 * 3 * 6 * 10));
    for (float v : x.x0) ASSERT_TRUE(std::isfinite(v));
    if (x.x0 == a_lat) {
      saw_a = true;
      EXPECT_EQ(x.context, a_ctx);
    }
  }
  EXPECT_TRUE(saw_a);
  // Fatal: the NaN file stops the run, naming it.
  DataOptions fatal = latent_options(toml);
  fatal.on_bad_data = BadDataPolicy::fatal;
  std::string e = error_of([&] {
    auto d = open_dataset(fatal);
    for (int64_t i = 0; i < 6; ++i) d->get(i);
  });
  EXPECT_NE(e.find("d.safetensors': 'latents' holds non-finite values"), std::string::npos) << e;
  // A second shape: a second bucket, or the one the requested size selects.
  write_latents(dir.file("cache/c.safetensors"), {4, 2, 6, 10}, {5, 6}, 3);
  EXPECT_EQ(open_dataset(latent_options(toml))->batch_shapes().size(), 2u);
  DataOptions sized = latent_options(toml);
  sized.frames = 2, sized.height = 6, sized.width = 10;
  expect_shape(only_shape(*open_dataset(sized)), 4, 2, 6, 10);
  sized.frames = 5;
  e = error_of([&] { open_dataset(sized); });
  EXPECT_NE(e.find("no cached clip has the requested latent shape (--frames 5 --height 6 --width 10"),
            std::string::npos)
      << e;
}

TEST(LatentCache, ShapeErrorsNameTheFileAndTheFix) {
  QuietLogs quiet;
  TempDir dir;
  std::filesystem::create_directories(dir.file("cache"));
  const std::string toml = write_toml(dir, "[[datasets]]\ncache_directory = \"cache\"\n");
  struct Case {
    Shape lat, ctx;
    std::string expect;
  };
  for (const Case& c : std::vector<Case>{{{16, 3, 6, 10}, {5, 6}, "16 channels but the model's in_dim is 4"},
                                         {{4, 3, 6, 10}, {5, 7}, "does not fit the model: it needs [L, 6]"},
                                         {{4, 3, 6, 10}, {9, 6}, "1 <= L <= text_len 8"},
                                         {{4, 3, 6}, {5, 6}, "expected [C, F, H, W]"}}) {
    write_latents(dir.file("cache/x.safetensors"), c.lat, c.ctx, 5);
    const std::string e = error_of([&] { open_dataset(latent_options(toml)); });
    EXPECT_NE(e.find("x.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << e;
  }
  write_bytes(dir.file("cache/x.safetensors"), "not a safetensors file");
  const std::string e = error_of([&] { open_dataset(latent_options(toml)); });
  EXPECT_NE(e.find("no usable clips; first problem: "), std::string::npos) << e;
  EXPECT_NE(e.find("x.safetensors"), std::string::npos) << e;
}

// A folder of `n` short random clips (mp4, 12x16, 5 frames) with captions "clip <i>".
void make_folder(const TempDir& dir, int n) {
  std::filesystem::create_directories(dir.file("videos"));
  for (int i = 0; i < n; ++i) {
    encode_video(dir.file(cat("videos/v", i, ".mp4")), smooth_clip(5, 12, 16, uint64_t(100 + i)));
    std::ofstream(dir.file(cat("videos/v", i, ".txt"))) << "clip " << i << "\n";
  }
}

DataOptions video_options(const std::string& toml) {
  DataOptions o;
  o.source = toml;
  return o;
}

TEST(VideoClips, DecodesResizesAndCaptions) {
  QuietLogs quiet;
  TempDir dir;
  make_folder(dir, 2);
  const std::string toml = write_toml(dir, R"([general]
resolution = [8, 6]
target_frames = 3
[[datasets]]
video_directory = "videos"
frame_extraction = "slide"
frame_stride = 2
)");
  auto data = open_dataset(video_options(toml));
  const DataShape s = only_shape(*data);
  expect_shape(s, 3, 3, 6, 8);
  // 2 videos x starts {0, 2}: one epoch visits each clip once; the reference is decode + resize_crop.
  std::set<std::pair<std::string, float>> seen;
  for (int64_t i = 0; i < 4; ++i) {
    const DataSample x = data->get(i);
    ASSERT_EQ(x.x0.size(), size_t(3 * 3 * 6 * 8));
    seen.insert({x.caption, x.x0[0]});
    const int v = x.caption == "clip 0" ? 0 : 1;
    ASSERT_EQ(x.caption, cat("clip ", v));
    bool matched = false;
    for (int64_t start : {0, 2}) {
      const RgbVideo clip = decode_video(dir.file(cat("videos/v", v, ".mp4")), start, 3);
      std::vector<float> ref(x.x0.size());
      rgb_to_model(resize_crop(clip, {6, 8}).data(), 3, 6, 8, ref.data());
      matched |= ref == x.x0;
    }
    EXPECT_TRUE(matched) << "sample " << i;
  }
  EXPECT_EQ(seen.size(), 4u);
  // A pure function of (seed, index): a second instance draws the same samples.
  auto again = open_dataset(video_options(toml));
  for (int64_t i : {5, 2, 9}) EXPECT_EQ(again->get(i).x0, data->get(i).x0);
  // Explicit sizes must agree with the file.
  DataOptions o = video_options(toml);
  o.height = 8;
  EXPECT_NE(error_of([&] { open_dataset(o); }).find("no clip has the requested size (--frames 0 --height 8"),
            std::string::npos);
}

// enable_bucket: each video at the bucket of its aspect ratio (two buckets here); source_fps 32: every other frame.
TEST(VideoClips, BucketsAndFrameDropping) {
  QuietLogs quiet;
  TempDir dir;
  std::filesystem::create_directories(dir.file("videos"));
  encode_video(dir.file("videos/wide.mp4"), smooth_clip(6, 8, 40, 1));    // aspect 5: bucket 64 x 16
  encode_video(dir.file("videos/plain.mp4"), smooth_clip(6, 12, 16, 2));  // aspect 1.33: bucket 32 x 32
  for (const char* v : {"wide", "plain"}) std::ofstream(dir.file(cat("videos/", v, ".txt"))) << v;
  const std::string toml = write_toml(dir, R"([general]
resolution = [32, 32]
enable_bucket = true
source_fps = 32
target_frames = [3]
batch_size = 2
[[datasets]]
video_directory = "videos"
)");
  auto data = open_dataset(video_options(toml));
  const std::vector<BatchShape> shapes = data->batch_shapes();
  ASSERT_EQ(shapes.size(), 2u);
  expect_shape(shapes[0].shape, 3, 3, 16, 64);
  expect_shape(shapes[1].shape, 3, 3, 32, 32);
  EXPECT_EQ(shapes[0].clips, 1);  // one clip in each bucket
  for (int64_t i = 0; i < 2; ++i) {
    const DataSample x = data->get(i);
    const bool wide = x.caption == "wide";
    const int64_t h = wide ? 16 : 32, w = wide ? 64 : 32;
    const RgbVideo all = decode_video(dir.file(cat("videos/", x.caption, ".mp4")));
    RgbVideo kept{3, all.height, all.width, all.fps, {}};  // frames 0, 2, 4 of 6 at 32 -> 16 fps
    for (int64_t f : {0, 2, 4})
      kept.rgb.insert(kept.rgb.end(), all.frame(f), all.frame(f) + all.height * all.width * 3);
    std::vector<float> ref(size_t(3 * 3 * h * w));
    rgb_to_model(resize_crop(kept, {h, w}).data(), 3, h, w, ref.data());
    EXPECT_EQ(x.x0, ref) << x.caption;
  }
}

// A 24-bit BMP of random pixels, written by hand (bottom-up BGR rows padded to 4 bytes); rgb [h, w, 3].
std::vector<uint8_t> write_bmp(const std::string& path, int64_t h, int64_t w, uint64_t seed) {
  Rng r(seed);
  std::vector<uint8_t> rgb(size_t(h * w * 3));
  for (auto& v : rgb) v = uint8_t(r.below(256));
  const int64_t row = (w * 3 + 3) / 4 * 4, size = 54 + row * h;
  auto le = [](std::string& out, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out += char(v >> (8 * i) & 255);
  };
  std::string b = "BM";
  le(b, uint32_t(size), 4), le(b, 0, 4), le(b, 54, 4);                                    // file header
  le(b, 40, 4), le(b, uint32_t(w), 4), le(b, uint32_t(h), 4), le(b, 1, 2), le(b, 24, 2);  // info header
  le(b, 0, 4), le(b, uint32_t(row * h), 4), le(b, 2835, 4), le(b, 2835, 4), le(b, 0, 4), le(b, 0, 4);
  for (int64_t y = h - 1; y >= 0; --y) {
    for (int64_t x = 0; x < w; ++x)
      for (int c : {2, 1, 0}) b += char(rgb[size_t((y * w + x) * 3 + c)]);
    b += std::string(size_t(row - w * 3), '\0');
  }
  write_bytes(path, b);
  return rgb;
}

// Images are one-frame clips, their own bucket beside the videos' (musubi-tuner's image datasets, from files).
TEST(VideoClips, ImagesAreOneFrameClips) {
  QuietLogs quiet;
  TempDir dir;
  make_folder(dir, 1);  // videos/v0.mp4, 5 frames of 12 x 16, caption "clip 0"
  std::filesystem::create_directories(dir.file("images"));
  const std::vector<uint8_t> pixels = write_bmp(dir.file("images/a.bmp"), 6, 8, 3);
  std::ofstream(dir.file("images/a.txt")) << "an image";
  const RgbVideo decoded = decode_video(dir.file("images/a.bmp"));
  ASSERT_EQ(decoded.frames, 1);
  EXPECT_EQ(decoded.rgb, pixels);  // FFmpeg's bmp reader gives the pixels written
  std::ofstream(dir.file("list.jsonl")) << R"({"image_path": "images/a.bmp", "caption": "listed"})"
                                        << "\n";
  const std::string toml = write_toml(dir, R"([general]
resolution = [8, 6]
[[datasets]]
video_directory = "videos"
target_frames = [3]
[[datasets]]
image_directory = "images"
[[datasets]]
image_jsonl_file = "list.jsonl"
)");
  auto data = open_dataset(video_options(toml));
  const std::vector<BatchShape> shapes = data->batch_shapes();
  ASSERT_EQ(shapes.size(), 2u);
  expect_shape(shapes[0].shape, 3, 1, 6, 8);
  expect_shape(shapes[1].shape, 3, 3, 6, 8);
  std::vector<float> ref(3 * 6 * 8);
  rgb_to_model(resize_crop(decoded, {6, 8}).data(), 1, 6, 8, ref.data());
  std::set<std::string> captions;
  for (int64_t i = 0; i < 3; ++i) {
    const DataSample x = data->get(i);
    captions.insert(x.caption);
    if (x.caption != "clip 0") {
      EXPECT_EQ(x.x0, ref) << x.caption;
    }
  }
  EXPECT_EQ(captions, (std::set<std::string>{"clip 0", "an image", "listed"}));
}

TEST(VideoClips, JsonlListAndErrors) {
  QuietLogs quiet;
  TempDir dir;
  make_folder(dir, 1);
  std::ofstream(dir.file("list.jsonl")) << R"({"video_path": "videos/v0.mp4", "caption": "a red thing"})"
                                        << "\n\n";
  const std::string toml = write_toml(dir, R"([general]
resolution = [8, 8]
target_frames = 5
[[datasets]]
video_jsonl_file = "list.jsonl"
)");
  auto data = open_dataset(video_options(toml));
  EXPECT_EQ(data->get(3).caption, "a red thing");
  std::ofstream(dir.file("list.jsonl")) << R"({"video_path": "videos/v0.mp4"})"
                                        << "\n";
  std::string e = error_of([&] { open_dataset(video_options(toml)); });
  EXPECT_NE(e.find("list.jsonl' line 1: expected"), std::string::npos) << e;
  write_toml(dir, "[general]\nresolution = [8, 8]\n[[datasets]]\nvideo_directory = \"videos\"\n");
  e = error_of([&] { open_dataset(video_options(toml)); });
  EXPECT_NE(e.find("sets no target_frames; add target_frames = [N, ...]"), std::string::npos) << e;
  write_toml(dir, "[general]\nresolution = [8, 8]\ntarget_frames = 2\n[[datasets]]\nvideo_directory = \"nowhere\"\n");
  e = error_of([&] { open_dataset(video_options(toml)); });
  EXPECT_NE(e.find("nowhere' (in dataset file"), std::string::npos) << e;
}

TEST(VideoClips, SkipOrStopOnBadFiles) {
  TempDir dir;
  make_folder(dir, 2);
  Rng r(4);
  std::string junk(3000, '\0');
  for (auto& c : junk) c = char(r.next_u64());
  write_bytes(dir.file("videos/v2.mp4"), junk);  // corrupt
  std::ofstream(dir.file("videos/v2.txt")) << "junk";
  encode_video(dir.file("videos/v3.webm"), smooth_clip(2, 12, 16, 9));  // too short for 4 frames
  std::ofstream(dir.file("videos/v3.txt")) << "short";
  encode_video(dir.file("videos/v4.mp4"), smooth_clip(5, 12, 16, 10));  // no caption file
  const std::string toml = write_toml(
      dir, "[general]\nresolution = [8, 8]\ntarget_frames = 4\n[[datasets]]\nvideo_directory = \"videos\"\n");
  ::testing::internal::CaptureStderr();
  auto data = open_dataset(video_options(toml));
  const std::string log = ::testing::internal::GetCapturedStderr();
  for (const char* name :
       {"v2.mp4", "v3.webm' is too short: 2 frames, its clips need 4", "v4.mp4' has no caption file"})
    EXPECT_NE(log.find(name), std::string::npos) << name << " in " << log;
  for (int64_t i = 0; i < 4; ++i) EXPECT_NE(data->get(i).caption, "junk");
  DataOptions fatal = video_options(toml);
  fatal.on_bad_data = BadDataPolicy::fatal;
  const std::string e = error_of([&] { open_dataset(fatal); });
  EXPECT_NE(e.find("v2.mp4"), std::string::npos) << e;
  EXPECT_NE(e.find("--on-bad-data fatal"), std::string::npos) << e;
  // Every file bad: an error, not a hang.
  for (int i : {0, 1}) write_bytes(dir.file(cat("videos/v", i, ".mp4")), junk);
  QuietLogs quiet;
  const std::string all = error_of([&] { open_dataset(video_options(toml)); });
  EXPECT_NE(all.find("no usable clips; first problem: "), std::string::npos) << all;
}

// A file that probes fine but fails to decode (truncated after the header frames) is skipped at load time.
TEST(VideoClips, DecodeFailureAtLoadIsSkipped) {
  QuietLogs quiet;
  TempDir dir;
  make_folder(dir, 2);
  encode_video(dir.file("v.avi"), smooth_clip(5, 12, 16, 7));
  const std::string avi = read_bytes(dir.file("v.avi"));
  write_bytes(dir.file("videos/v1.avi"), avi.substr(0, avi.size() * 6 / 10));  // AVI index lost: header says 5
  std::filesystem::remove(dir.file("videos/v1.mp4"));
  const std::string toml = write_toml(
      dir, "[general]\nresolution = [8, 8]\ntarget_frames = 5\n[[datasets]]\nvideo_directory = \"videos\"\n");
  auto data = open_dataset(video_options(toml));
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(data->get(i).caption, "clip 0");
}

// IDX files of `n` random 28x28 "digits" and their labels.
void write_idx(const TempDir& dir, int n, std::vector<uint8_t>& pixels, std::vector<uint8_t>& labels) {
  Rng r(77);
  pixels.resize(size_t(n * 28 * 28));
  labels.resize(size_t(n));
  for (auto& p : pixels) p = uint8_t(r.below(256));
  for (auto& l : labels) l = uint8_t(r.below(10));
  auto be = [](uint32_t v) {
    return std::string{char(v >> 24), char(v >> 16 & 255), char(v >> 8 & 255), char(v & 255)};
  };
  write_bytes(dir.file("train-images-idx3-ubyte"), std::string("\0\0\x08\x03", 4) + be(uint32_t(n)) + be(28) + be(28) +
                                                       std::string(pixels.begin(), pixels.end()));
  write_bytes(dir.file("train-labels-idx1-ubyte"),
              std::string("\0\0\x08\x01", 4) + be(uint32_t(n)) + std::string(labels.begin(), labels.end()));
}

TEST(MovingMnist, DigitsComeFromTheIdxFileAndBounceInBounds) {
  TempDir dir;
  std::vector<uint8_t> pixels, labels;
  write_idx(dir, 9, pixels, labels);
  DataOptions o;
  o.source = "moving-mnist";
  o.mnist_dir = dir.path.string();
  o.seed = 5;
  auto data = open_dataset(o);
  expect_shape(only_shape(*data), 3, 20, 64, 64);
  auto& mm = dynamic_cast<MovingMnist&>(*data);
  bool bounced = false;
  for (int64_t index : {0, 1, 2, 3}) {
    const MovingMnistClip c = mm.generate(index);
    for (int64_t f = 0; f < 20; ++f) {
      std::vector<uint8_t> ref(64 * 64, 0);  // the two IDX digits at their positions, max-combined
      for (int d = 0; d < 2; ++d) {
        const auto [top, left] = c.pos[d][size_t(f)];
        ASSERT_TRUE(top >= 0 && left >= 0 && top <= 36 && left <= 36) << top << "," << left;
        for (int64_t y = 0; y < 28; ++y)
          for (int64_t x = 0; x < 28; ++x) {
            uint8_t& p = ref[size_t((top + y) * 64 + left + x)];
            p = std::max(p, pixels[size_t(c.digit[size_t(d)] * 784 + y * 28 + x)]);
          }
        if (f >= 2) {  // a bounce: the step along an axis changes sign, or the digit rests on an edge
          const auto a = c.pos[d][size_t(f - 2)], b = c.pos[d][size_t(f - 1)], n = c.pos[d][size_t(f)];
          for (int ax = 0; ax < 2; ++ax)
            bounced |= (b[size_t(ax)] - a[size_t(ax)]) * (n[size_t(ax)] - b[size_t(ax)]) < 0;
        }
      }
      ASSERT_TRUE(std::equal(ref.begin(), ref.end(), c.canvas.begin() + f * 4096)) << "frame " << f;
    }
    const DataSample s = data->get(index);
    EXPECT_EQ(s.caption, cat("digits ", int(labels[size_t(c.digit[0])]), " and ", int(labels[size_t(c.digit[1])])));
    for (int ch = 0; ch < 3; ++ch)  // grey replicated to RGB, [-1, 1]
      EXPECT_EQ(s.x0[size_t(ch * 20 * 4096 + 4096 + 64 * 30 + 30)],
                float(c.canvas[4096 + 64 * 30 + 30]) / 127.5f - 1.0f);
  }
  EXPECT_TRUE(bounced);
  EXPECT_EQ(data->get(3).x0, open_dataset(o)->get(3).x0);  // pure in (seed, index)
  o.frames = 4, o.height = 16, o.width = 24;               // other sizes: resized and cropped from the canvas
  const DataSample small = open_dataset(o)->get(0);
  EXPECT_EQ(small.x0.size(), size_t(3 * 4 * 16 * 24));
}

TEST(MovingMnist, MissingFilesSayRunSetup) {
  TempDir dir;
  DataOptions o;
  o.source = "moving-mnist";
  o.mnist_dir = dir.file("empty");
  std::string e = error_of([&] { open_dataset(o); });
  EXPECT_NE(e.find("train-images-idx3-ubyte' is missing; run tools/setup.sh"), std::string::npos) << e;
  o.mnist_dir = dir.path.string();
  write_bytes(dir.file("train-images-idx3-ubyte"), std::string("\0\0\x08\x03\0\0\0\x09", 8));
  e = error_of([&] { open_dataset(o); });
  EXPECT_NE(e.find("train-images-idx3-ubyte' is not an IDX file"), std::string::npos) << e;
  o.source = "mnist";
  EXPECT_NE(error_of([&] { open_dataset(o); }).find("--data 'mnist' is unknown"), std::string::npos);
  o.source = "moving-mnist";
  o.in_dim = 16;
  std::vector<uint8_t> p, l;
  write_idx(dir, 3, p, l);
  EXPECT_NE(error_of([&] { open_dataset(o); }).find("model's in_dim is 16"), std::string::npos);
}

}  // namespace
}  // namespace ms::test
