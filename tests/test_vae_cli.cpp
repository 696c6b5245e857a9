// `megaslide vae encode|decode` end to end on the files of tests/data/vae/: Wan's own outputs, and bad input named.
#include <gtest/gtest.h>

#include "cli_util.h"
#include "core/units.h"
#include "file_util.h"
#include "io/safetensors.h"
#include "model/vae_config.h"
#include "registry/registry.h"
#include "temp_dir.h"
#include "test_util.h"
#include "vae/vae_model.h"

namespace ms::test {
namespace {

const std::string kWeights = kVaeArgs + " --backend cpu";  // the CPU's fp32 walk, which the fixtures hold to 1e-5

std::vector<float> read(const std::string& path, const std::string& name, Shape* shape = nullptr) {
  const auto f = SafetensorsFile::open(path);
  if (shape && f.find(name)) *shape = f.find(name)->shape;
  return tensor_values(f, name);
}

void write_tensor(const std::string& path, const std::string& name, const Shape& shape, const std::vector<float>& v) {
  write_safetensors(path, {{name, DType::f32, shape, v.data()}});
}

}  // namespace

// Without a usable GPU, --backend cuda names why and the way out, before anything is written.
TEST(VaeCli, BackendCudaWithoutAGpuIsAClearError) {
  if (backend_unavailable(BackendKind::cuda).empty()) GTEST_SKIP() << "a GPU is present: this checks a machine without";
  TempDir dir;
  const auto r = run_cli("vae encode " + kVaeArgs + " --input " + kVaeData + "clip.safetensors --backend cuda --out " +
                         dir.file("lat.safetensors"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.output.find("--backend cuda: " + backend_unavailable(BackendKind::cuda)), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("lat.safetensors")));
}

// A batch of two clips (the fixture's clip, and its mirror image) through encode and decode: each is Wan's result.
TEST(VaeCli, EncodesAndDecodesLikeWan) {
  TempDir dir;
  const std::string clip = kVaeData + "clip.safetensors";
  Shape shape;
  const auto video = read(clip, "video", &shape);  // [1, 3, 13, 16, 24]
  std::vector<float> two(video);
  two.insert(two.end(), video.begin(), video.end());
  write_tensor(dir.file("in.safetensors"), "video", {2, 3, 13, 16, 24}, two);
  auto r = run_cli("vae encode " + kWeights + " --input " + dir.file("in.safetensors") + " --out " +
                   dir.file("lat.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("latents [2, 16, 4, 2, 3]; 26 frames in"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("peak memory"), std::string::npos) << r.output;
  Shape lat_shape;
  const auto lat = read(dir.file("lat.safetensors"), "latents", &lat_shape);
  ASSERT_EQ(lat_shape, (Shape{2, 16, 4, 2, 3}));
  const auto want = read(clip, "latents");
  EXPECT_LT(rel_l2(std::vector<float>(lat.begin(), lat.begin() + 384), want), 1e-5);
  EXPECT_LT(rel_l2(std::vector<float>(lat.begin() + 384, lat.end()), want), 1e-5);

  write_tensor(dir.file("want_lat.safetensors"), "latents", {1, 16, 4, 2, 3}, want);
  r = run_cli("vae decode " + kWeights + " --input " + dir.file("want_lat.safetensors") + " --out " +
              dir.file("dec.safetensors"));
  ASSERT_EQ(r.code, 0) << r.output;
  Shape dec_shape;
  const auto dec = read(dir.file("dec.safetensors"), "video", &dec_shape);
  EXPECT_EQ(dec_shape, (Shape{1, 3, 13, 16, 24}));
  EXPECT_LT(rel_l2(dec, read(clip, "decoded")), 1e-5);
}

TEST(VaeCli, BadInputIsNamed) {
  TempDir dir;
  auto fails = [&](const std::string& name, const Shape& shape, const std::string& verb, const std::string& part) {
    std::vector<float> v(size_t(numel(shape)), 0.25f);
    write_tensor(dir.file("in.safetensors"), name, shape, v);
    const auto r = run_cli("vae " + verb + " " + kWeights + " --input " + dir.file("in.safetensors") + " --out " +
                           dir.file("out.safetensors"));
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(part), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir.file("out.safetensors")));
  };
  fails("video", {1, 3, 6, 16, 16}, "encode", "6 frames; the VAE takes 1 + 4k frames (e.g. 5 or 9)");
  fails("video", {1, 3, 5, 20, 16}, "encode", "height 20; the VAE takes multiples of 8 (e.g. 16 or 24)");
  fails("video", {1, 4, 5, 16, 16}, "encode", "vae encode takes [B, 3, F, H, W]");
  fails("latents", {1, 12, 2, 2, 2}, "decode", "has shape [1, 12, 2, 2, 2]; vae decode takes [B, 16, T, h, w]");
  fails("video", {1, 16, 2, 2, 2}, "decode", "no tensor 'latents' (it holds 'video')");
  const auto r = run_cli("vae encode " + kWeights + " --vae-tile 20,32 --input x --out y");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("--vae-tile 20,32: tile sides are pixels, multiples of 8"), std::string::npos) << r.output;
}

// What a clip needs is checked before it is encoded: over the limit, the error names the need, the limit and the
// tiles that would fit; frames beyond a chunk cost nothing more (memory is bounded by the chunk, not the clip).
TEST(VaeCli, AClipOverTheHostLimitIsRefusedNamingTilesThatFit) {
  const VaeConfig c = read_vae_config(kVaeData + "tiny_config.json");
  EXPECT_EQ(vae_encode_bytes(c, 9, 64, 96), vae_encode_bytes(c, 81, 64, 96));
  EXPECT_EQ(vae_decode_bytes(c, 9, 64, 96), vae_decode_bytes(c, 81, 64, 96));
  EXPECT_GT(vae_encode_bytes(c, 5, 128, 96), vae_encode_bytes(c, 5, 64, 96));
  const VaeChunking tiles{.tile_h = 256, .tile_w = 256};
  EXPECT_LT(vae_encode_bytes(c, 5, 512, 576, tiles), vae_encode_bytes(c, 5, 512, 576));
  EXPECT_LT(vae_decode_bytes(c, 5, 512, 576, tiles), vae_decode_bytes(c, 5, 512, 576));

  TempDir dir;
  std::vector<float> video(size_t(3 * 5 * 512 * 576));
  for (size_t i = 0; i < video.size(); ++i) video[i] = float(int(i % 97) - 48) / 64.0f;
  write_tensor(dir.file("in.safetensors"), "video", {1, 3, 5, 512, 576}, video);
  const int64_t latents = 4 * 16 * 2 * 64 * 72;
  const int64_t whole = vae_encode_bytes(c, 5, 512, 576) + latents,
                tiled = vae_encode_bytes(c, 5, 512, 576, tiles) + latents;
  const auto r = run_cli(cat("vae encode ", kWeights, " --input ", dir.file("in.safetensors"), " --out ",
                             dir.file("out.safetensors"), " --host-memory ", (whole + tiled) / 2));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find(cat("vae encode needs ", format_bytes(double(whole)), " of host memory (encoding 5x512x576")),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(cat("--vae-tile 256,256 needs ", format_bytes(double(tiled)), " and fits")),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.safetensors")));
}

}  // namespace ms::test
