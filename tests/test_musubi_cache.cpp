// musubi-tuner's Wan caches (tests/data/musubi, written by tools/make_musubi_fixtures.py in the layout of musubi's
// own cache writers; expected.json holds float64 sums of every tensor as torch saw it): names, keys, dtypes, the
// item-key pairing of latent and text files, i2v tensors, missing text files and the bad-data policy.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "data/dataset.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train_util.h"

namespace ms::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kMusubiData = fs::path(MEGASLIDE_TEST_DATA) / "musubi";

json expected() {
  std::ifstream in(kMusubiData / "expected.json");
  return json::parse(in);
}

// A copy of the fixture cache in dir/cache and a TOML naming it.
std::string copy_cache(const TempDir& dir, const std::string& extra_keys = "") {
  fs::copy(kMusubiData / "cache", dir.file("cache"));
  const std::string toml = dir.file("data.toml");
  std::ofstream(toml) << "[[datasets]]\ncache_directory = \"cache\"\n" << extra_keys;
  return toml;
}

DataOptions wan_options(const std::string& toml, int64_t frames = 0, int64_t height = 0, int64_t width = 0) {
  DataOptions o;
  o.source = toml;
  o.in_dim = 16, o.text_len = 512, o.text_dim = 4096;
  o.frames = frames, o.height = height, o.width = width;
  return o;
}

struct Stats {
  double sum = 0, sumsq = 0;
};
Stats stats(const std::vector<float>& v) {
  Stats s;
  for (float x : v) s.sum += x, s.sumsq += double(x) * x;
  return s;
}

// Whether v's sums and first values are those expected.json records for a tensor.
bool matches(const std::vector<float>& v, const json& want) {
  const Stats s = stats(v);
  if (std::fabs(s.sum - want["sum"].get<double>()) > 1e-9 * (1 + std::fabs(s.sum))) return false;
  if (std::fabs(s.sumsq - want["sumsq"].get<double>()) > 1e-9 * s.sumsq) return false;
  for (size_t i = 0; i < want["first"].size(); ++i)
    if (double(v[i]) != want["first"][i].get<double>()) return false;
  return true;
}

TEST(MusubiCache, ReadsTheLatentShapeItIsAskedFor) {
  TempDir dir;
  const json want = expected();
  const std::string toml = copy_cache(dir, "num_repeats = 2\n");
  testing::internal::CaptureStderr();
  auto data = open_dataset(wan_options(toml, 3, 6, 8));
  const std::string log = testing::internal::GetCapturedStderr();
  // The orphan has no text file: bad data, named; the i2v tensors: one warning per kind.
  EXPECT_NE(log.find("orphan_00000-009_0064x0048_wan.safetensors"), std::string::npos) << log;
  EXPECT_NE(log.find("orphan_wan_te.safetensors"), std::string::npos) << log;
  for (const char* kind : {"'clip_*'", "'latents_image_*'", "'f_indices_*'"}) {
    const size_t at = log.find(kind);
    EXPECT_NE(at, std::string::npos) << kind << " in " << log;
    EXPECT_EQ(log.find(kind, at + 1), std::string::npos) << kind << " warned twice: " << log;
  }
  EXPECT_NE(log.find("2 cached clips of other shapes"), std::string::npos) << log;  // photo_1 and wide
  ASSERT_EQ(data->batch_shapes().size(), 1u);
  const DataShape s = data->batch_shapes().front().shape;
  EXPECT_EQ(s.channels, 16);
  EXPECT_EQ(s.frames, 3);
  EXPECT_EQ(s.height, 6);
  EXPECT_EQ(s.width, 8);
  // One epoch: clipA's two chunks and clip_b (section -01), twice each, each with its item's text embedding.
  std::map<std::string, int> seen;
  for (int64_t i = 0; i < 6; ++i) {
    const DataSample x = data->get(i);
    ASSERT_EQ(x.x0.size(), size_t(16 * 3 * 6 * 8));
    std::string file;
    for (const auto& [name, lat] : want["latents"].items())
      if (matches(x.x0, lat["latents"])) file = name;
    ASSERT_FALSE(file.empty()) << "sample " << i << " matches no fixture";
    ++seen[file];
    const json& text = want["texts"][want["latents"][file]["item"].get<std::string>()];
    EXPECT_EQ(x.context.size(), size_t(text["rows"].get<int64_t>() * 4096)) << file;
    EXPECT_TRUE(matches(x.context, text["context"])) << file;
  }
  EXPECT_EQ(seen, (std::map<std::string, int>{{"clipA_00000-009_0064x0048_wan.safetensors", 2},
                                              {"clipA_00008-009_0064x0048_wan.safetensors", 2},
                                              {"clip_b_00000-009-01_0064x0048_wan.safetensors", 2}}));
}

TEST(MusubiCache, ImagesAndOtherBucketsByTheirShapes) {
  QuietLogs quiet;
  TempDir dir;
  const json want = expected();
  const std::string toml = copy_cache(dir);
  // The image item (F = 1, no frame_count, item key less two fields) and the clip of another resolution.
  for (const auto& [shape, file] : std::vector<std::pair<Shape, std::string>>{
           {{1, 6, 8}, "photo_1_0064x0048_wan.safetensors"}, {{2, 4, 6}, "wide_00000-005_0048x0032_wan.safetensors"}}) {
    auto data = open_dataset(wan_options(toml, shape[0], shape[1], shape[2]));
    const DataSample x = data->get(0);
    EXPECT_TRUE(matches(x.x0, want["latents"][file]["latents"])) << file;
    const std::string item = want["latents"][file]["item"];
    EXPECT_TRUE(matches(x.context, want["texts"][item]["context"])) << file;
  }
  // Unselected, every shape is a bucket, at the TOML's batch size (1: musubi-tuner's default) or --batch-size.
  DataOptions o = wan_options(toml);
  for (int64_t batch : {0, 2}) {
    o.batch_size = batch;
    const std::vector<BatchShape> b = open_dataset(o)->batch_shapes();
    ASSERT_EQ(b.size(), 3u);
    const int64_t want[3][4] = {{1, 6, 8, 1}, {2, 4, 6, 1}, {3, 6, 8, batch == 0 ? 1 : 2}};  // F, H, W, clips
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(b[i].shape.channels, 16);
      EXPECT_EQ(b[i].shape.frames, want[i][0]);
      EXPECT_EQ(b[i].shape.height, want[i][1]);
      EXPECT_EQ(b[i].shape.width, want[i][2]);
      EXPECT_EQ(b[i].clips, want[i][3]);  // the largest batch: one clip alone fills at most one
    }
  }
  EXPECT_NE(error_of([&] { open_dataset(wan_options(toml, 4, 6, 8)); }).find("no cached clip has the requested"),
            std::string::npos);
}

TEST(MusubiCache, BadFilesAreNamedAndFatalStops) {
  QuietLogs quiet;
  TempDir dir;
  const std::string toml = copy_cache(dir);
  DataOptions fatal = wan_options(toml, 3, 6, 8);
  fatal.on_bad_data = BadDataPolicy::fatal;
  std::string e = error_of([&] { open_dataset(fatal); });
  EXPECT_NE(e.find("orphan_00000-009_0064x0048_wan.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("has no text-encoder file"), std::string::npos) << e;
  EXPECT_NE(e.find("--on-bad-data fatal"), std::string::npos) << e;
  fs::remove(dir.file("cache/orphan_00000-009_0064x0048_wan.safetensors"));
  EXPECT_NO_THROW(open_dataset(fatal));

  // Each defect in a copy of clipA's first chunk (f32, written here) is bad data naming the file.
  const std::string path = dir.file("cache/clipA_00000-009_0064x0048_wan.safetensors");
  std::vector<float> lat(16 * 3 * 6 * 8);
  for (size_t i = 0; i < lat.size(); ++i) lat[i] = float(std::sin(double(i)));
  struct Case {
    std::string key;
    Shape shape;
    std::map<std::string, std::string> metadata;
    std::string expect;
  };
  const std::map<std::string, std::string> wan{{"architecture", "wan"}, {"frame_count", "9"}};
  for (const Case& c : std::vector<Case>{
           {"latents_3x6x9_float32", {16, 3, 6, 8}, wan, "disagrees with its name"},
           {"latents_3x6x8_bfloat16", {16, 3, 6, 8}, wan, "is stored as F32, not as its name says"},
           {"latents_3x6x8_float32", {16, 3, 6, 8}, {{"architecture", "hv"}}, "of architecture 'hv', not wan"},
           {"latents_3x6x8_float32", {16, 3, 6, 8}, {{"architecture", "wan"}}, ""},
           {"latents_2x3x6x8_float32", {16, 3, 6, 8}, wan, "has no latent tensor"},
           {"latents_3x6x8_float32", {16 * 3, 6, 8}, wan, "expected rank 4"}}) {
    SCOPED_TRACE(c.key);
    write_safetensors(path, {{c.key, DType::f32, c.shape, lat.data()}}, c.metadata);
    if (c.expect.empty()) {  // frame_count is optional: the name says it is a video clip
      EXPECT_NO_THROW(open_dataset(fatal));
      continue;
    }
    e = error_of([&] { open_dataset(fatal); });
    EXPECT_NE(e.find("clipA_00000-009_0064x0048_wan.safetensors"), std::string::npos) << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << e;
  }
  // Non-finite latents are found when the clip is loaded.
  lat[7] = std::nanf("");
  write_safetensors(path, {{"latents_3x6x8_float32", DType::f32, {16, 3, 6, 8}, lat.data()}}, wan);
  e = error_of([&] {
    auto d = open_dataset(fatal);
    for (int64_t i = 0; i < 3; ++i) d->get(i);
  });
  EXPECT_NE(e.find("clipA_00000-009_0064x0048_wan.safetensors': 'latents_3x6x8_float32' holds non-finite"),
            std::string::npos)
      << e;
  // Skip: the other two clips train.
  auto skip = open_dataset(wan_options(toml, 3, 6, 8));
  for (int64_t i = 0; i < 6; ++i)
    for (float v : skip->get(i).x0) ASSERT_TRUE(std::isfinite(v));
  // A text file of the wrong width is bad data for every chunk that shares it.
  std::vector<float> ctx(3 * 100, 0.5f);
  write_safetensors(dir.file("cache/clipA_wan_te.safetensors"),
                    {{"varlen_t5_float32", DType::f32, {3, 100}, ctx.data()}});
  e = error_of([&] { open_dataset(fatal); });
  EXPECT_NE(e.find("clipA_wan_te.safetensors': text embedding 'varlen_t5_float32' [3, 100] does not fit the model"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace ms::test
