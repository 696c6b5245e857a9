// The VAEs against files written by their owners' code (tests/data/vae/ and vae22/, tools/make_vae*_fixtures.py): Wan's
// own WanVAE_ module's float64 outputs, torch.save'd weights, diffusers' parameter names; and bad weight files.
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "file_util.h"
#include "io/safetensors.h"
#include "model/vae_name_map.h"
#include "temp_dir.h"
#include "test_util.h"
#include "vae/vae_model.h"

namespace ms::test {
namespace {

const std::string kVae22Data = std::string(MEGASLIDE_TEST_DATA) + "/vae22/";

// Wan2.2's name -> diffusers' as convert_vae_22 renames it (its rows in tests/data/vae22/, Wan2.2's own config; the
// names depend on dim_mult and num_res_blocks alone).
std::map<std::string, std::string> diffusers22_names() {
  std::map<std::string, std::string> m;
  for (const auto& r : read_json(kVae22Data + "diffusers_default_names.json")) m[r[1]] = r[0];
  return m;
}

// Expects f to throw an ms::Error whose message holds `part`.
void expect_error_holds(const std::function<void()>& f, const std::string& part) {
  const std::string message = error_of(f);
  EXPECT_NE(message.find(part), std::string::npos) << message;
}

}  // namespace

// Wan's streaming encode and decode (its module, float64) at 1, 5 and 13 frames of a 16x24 clip.
TEST(VaeFiles, MatchesWansOwnModule) {
  const VaeWeights w = VaeWeights::load(kVaeData + "tiny_vae.pth", kVaeData + "tiny_config.json");
  const auto clip = SafetensorsFile::open(kVaeData + "clip.safetensors");
  const auto video = tensor_values(clip, "video");  // [1, 3, 13, 16, 24]
  const int64_t H = 16, W = 24, plane = H * W;
  for (auto [F, suffix] : {std::pair<int64_t, std::string>{1, "_f1"}, {5, "_f5"}, {13, ""}}) {
    std::vector<float> part(size_t(3 * F * plane));  // the first F frames of each channel
    for (int64_t c = 0; c < 3; ++c) std::copy_n(video.data() + c * 13 * plane, F * plane, part.data() + c * F * plane);
    const auto want_lat = tensor_values(clip, "latents" + suffix), want_dec = tensor_values(clip, "decoded" + suffix);
    std::vector<float> lat(want_lat.size()), dec(want_dec.size());
    vae_encode(w, part.data(), F, H, W, lat.data());
    EXPECT_LT(rel_l2(lat, want_lat), 1e-5) << F << " frames";
    vae_decode(w, want_lat.data(), 1 + (F - 1) / 4, 2, 3, dec.data());
    EXPECT_LT(rel_l2(dec, want_dec), 1e-5) << F << " frames";
  }
}

// The same tensors from torch.save's zip and from safetensors give bit-identical results; bf16 weights are the
// f32 ones rounded to nearest even.
TEST(VaeFiles, PthAndSafetensorsGiveIdenticalResults) {
  const std::string config = kVaeData + "tiny_config.json";
  const VaeWeights pth = VaeWeights::load(kVaeData + "tiny_vae.pth", config);
  const VaeWeights st = VaeWeights::load(kVaeData + "tiny_vae.safetensors", config);
  const VaeWeights bf = VaeWeights::load(kVaeData + "tiny_vae_bf16.safetensors", config);
  ASSERT_EQ(pth.count(), 61887);
  for (const auto& [name, shape] : vae_param_shapes(pth.config()))
    for (int64_t i = 0; i < numel(shape); ++i) {
      ASSERT_EQ(pth.get(name)[i], st.get(name)[i]) << name;
      ASSERT_EQ(bf.get(name)[i], bf16_to_f32(f32_to_bf16(pth.get(name)[i]))) << name;
    }
  const auto video = tensor_values(SafetensorsFile::open(kVaeData + "clip.safetensors"), "video");
  std::vector<float> a(16 * 4 * 6), b(a.size());
  vae_encode(pth, video.data(), 13, 16, 24, a.data());
  vae_encode(st, video.data(), 13, 16, 24, b.data());
  EXPECT_EQ(a, b);
}

// diffusers' convert_vae on Wan's full VAE (every row), and diffusers' own module at the tiny config: each name
// maps to the Wan name of the same shape, one to one.
TEST(VaeFiles, DiffusersNamesMapOntoWans) {
  const VaeConfig wan21;
  const auto rows = read_json(kVaeData + "diffusers_default_names.json");
  ASSERT_EQ(rows.size(), 194u);
  const auto shapes = vae_param_shapes(wan21);
  ASSERT_EQ(shapes.size(), rows.size());
  std::map<std::string, Shape> wan(shapes.begin(), shapes.end());
  for (const auto& r : rows) {
    EXPECT_EQ(wan_vae_name(r[0], wan21), r[1].get<std::string>()) << r[0];
    EXPECT_EQ(wan.at(r[1]), r[2].get<Shape>()) << r[1];
  }
  const VaeConfig tiny = read_vae_config(kVaeData + "tiny_config.json");
  const auto tiny_shapes = vae_param_shapes(tiny);
  std::map<std::string, Shape> want(tiny_shapes.begin(), tiny_shapes.end()), got;
  for (const auto& r : read_json(kVaeData + "diffusers_tiny_names.json"))
    got[wan_vae_name(r[0], tiny)] = r[1].get<Shape>();
  EXPECT_EQ(got, want);
  EXPECT_EQ(wan_vae_name("encoder.conv1.weight", wan21), "");  // Wan's names stay
}

// A diffusers vae/ folder (config.json in its keys, diffusers' names) loads to the same weights.
TEST(VaeFiles, DiffusersFolderLoads) {
  TempDir dir;
  const VaeWeights wan = VaeWeights::load(kVaeData + "tiny_vae.safetensors", kVaeData + "tiny_config.json");
  auto cfg = read_json(kVaeData + "tiny_config.json");
  cfg["base_dim"] = cfg["dim"];
  cfg.erase("dim");
  cfg["_class_name"] = "AutoencoderKLWan";
  cfg["dropout"] = 0.0;
  std::ofstream(dir.file("config.json")) << cfg.dump();
  std::vector<TensorRef> refs;
  std::vector<std::vector<float>> keep;
  for (const auto& r : read_json(kVaeData + "diffusers_tiny_names.json")) {
    const Shape s = r[1].get<Shape>();
    const float* src = wan.get(wan_vae_name(r[0], wan.config()));
    keep.emplace_back(src, src + numel(s));
    refs.push_back({r[0], DType::f32, s, keep.back().data()});
  }
  write_safetensors(dir.file("diffusion_pytorch_model.safetensors"), refs);
  const VaeWeights dif = VaeWeights::load(dir.path.string(), "");
  EXPECT_EQ(dif.config().dim, 4);
  for (const auto& [name, shape] : vae_param_shapes(wan.config()))
    ASSERT_EQ(std::vector<float>(dif.get(name), dif.get(name) + numel(shape)),
              std::vector<float>(wan.get(name), wan.get(name) + numel(shape)))
        << name;
}

// diffusers' Wan2.2 config.json (convert_wan_to_diffusers.py's vae22_diffusers_config) reads as Wan2.2's VAE.
TEST(VaeFiles, Wan22DiffusersConfigReadsAsWan22) {
  const VaeConfig c = VaeConfig::wan22();
  TempDir dir;
  nlohmann::json j{{"_class_name", "AutoencoderKLWan"},
                   {"base_dim", 160},
                   {"z_dim", 48},
                   {"is_residual", true},
                   {"in_channels", 12},
                   {"out_channels", 12},
                   {"decoder_base_dim", 256},
                   {"scale_factor_temporal", 4},
                   {"scale_factor_spatial", 16},
                   {"patch_size", 2},
                   {"latents_mean", c.latents_mean},
                   {"latents_std", c.latents_std},
                   {"clip_output", false}};
  std::ofstream(dir.file("config.json")) << j.dump();
  const VaeConfig r = read_vae_config(dir.file("config.json"));
  EXPECT_TRUE(r.is_residual);
  EXPECT_EQ(r.patch_size, 2);
  EXPECT_EQ(r.dim, 160);
  EXPECT_EQ(r.decoder_dim(), 256);
  EXPECT_EQ(r.z_dim, 48);
  EXPECT_EQ(vae_param_shapes(r), vae_param_shapes(c));
}

// Wan2.2's own module (vae2_2.py, float64, tests/data/vae22/ by tools/make_vae22_fixtures.py): its torch.save'd
// weights read with no config (told by the shapes), its encode and decode at 1, 5 and 9 frames of a 32 x 48 clip;
// diffusers' convert_vae_22 on Wan2.2's own config (every row) and diffusers' tiny is_residual module map onto Wan's
// names and shapes; and Wan2.2's own config counts the parameters its module holds.
TEST(VaeFiles, Wan22MatchesWansOwnModule) {
  const std::string& data = kVae22Data;
  const VaeWeights w = VaeWeights::load(data + "tiny_vae22.pth", "");
  const VaeConfig& c = w.config();
  ASSERT_TRUE(c.is_residual);
  EXPECT_EQ(c.dim, 4);
  EXPECT_EQ(c.decoder_dim(), 4);
  EXPECT_EQ(w.count(), 305684);
  const auto clip = SafetensorsFile::open(data + "clip.safetensors");
  const auto video = tensor_values(clip, "video");  // [1, 3, 9, 32, 48]
  const int64_t H = 32, W = 48, plane = H * W;
  for (const int64_t F : {1, 5, 9}) {
    std::vector<float> part(size_t(3 * F * plane));
    for (int64_t ch = 0; ch < 3; ++ch)
      std::copy_n(video.data() + ch * 9 * plane, F * plane, part.data() + ch * F * plane);
    const auto want_lat = tensor_values(clip, cat("latents_f", F)), want_dec = tensor_values(clip, cat("decoded_f", F));
    std::vector<float> lat(want_lat.size()), dec(want_dec.size());
    ASSERT_EQ(lat.size(), size_t(48 * (1 + (F - 1) / 4) * 2 * 3));
    vae_encode(w, part.data(), F, H, W, lat.data());
    EXPECT_LT(rel_l2(lat, want_lat), 1e-5) << F << " frames";
    vae_decode(w, want_lat.data(), 1 + (F - 1) / 4, 2, 3, dec.data());
    EXPECT_LT(rel_l2(dec, want_dec), 1e-5) << F << " frames";
  }
  const VaeConfig wan22 = VaeConfig::wan22();
  EXPECT_EQ(VaeWeights::count_for(wan22), 704688668);
  const auto shapes = vae_param_shapes(wan22);
  const std::map<std::string, Shape> wan(shapes.begin(), shapes.end());
  const auto rows = read_json(data + "diffusers_default_names.json");
  ASSERT_EQ(rows.size(), shapes.size());
  for (const auto& r : rows) {
    EXPECT_EQ(wan_vae_name(r[0], wan22), r[1].get<std::string>()) << r[0];
    EXPECT_EQ(wan.at(r[1]), r[2].get<Shape>()) << r[1];
  }
  const auto tiny_shapes = vae_param_shapes(c);
  std::map<std::string, Shape> want(tiny_shapes.begin(), tiny_shapes.end()), got;
  for (const auto& r : read_json(data + "diffusers_tiny_names.json")) got[wan_vae_name(r[0], c)] = r[1].get<Shape>();
  EXPECT_EQ(got, want);
}

// A Wan2.2 VAE file without a config: its 12-channel first conv tells it apart, its widths come from the shapes, and
// in diffusers' names it loads to the same weights.
TEST(VaeFiles, Wan22ConfigComesFromTheFilesShapes) {
  VaeConfig c = VaeConfig::wan22();
  c.dim = 8;
  c.dec_dim = 12;
  const VaeWeights w = VaeWeights::random(c, 5);
  const auto names = diffusers22_names();
  TempDir dir;
  std::vector<TensorRef> wan, dif;
  for (const auto& [name, shape] : vae_param_shapes(c)) {
    wan.push_back({name, DType::f32, shape, w.get(name)});
    dif.push_back({names.at(name), DType::f32, shape, w.get(name)});
  }
  write_safetensors(dir.file("wan.safetensors"), wan);
  write_safetensors(dir.file("diffusers.safetensors"), dif);
  for (const char* file : {"wan.safetensors", "diffusers.safetensors"}) {
    const VaeWeights got = VaeWeights::load(dir.file(file), "");
    EXPECT_TRUE(got.config().is_residual) << file;
    EXPECT_EQ(got.config().dim, 8) << file;
    EXPECT_EQ(got.config().decoder_dim(), 12) << file;
    ASSERT_EQ(got.count(), w.count()) << file;
    EXPECT_EQ(std::vector<float>(got.data(), got.data() + got.count()),
              std::vector<float>(w.data(), w.data() + w.count()))
        << file;
  }
  wan[0].shape = {8, 5, 3, 3, 3};
  write_safetensors(dir.file("odd.safetensors"), {wan[0]});
  expect_error_holds([&] { VaeWeights::load(dir.file("odd.safetensors"), ""); }, "takes 5 channels; Wan2.1's takes 3");
}

TEST(VaeFiles, BadWeightsAreNamed) {
  TempDir dir;
  const VaeWeights wan = VaeWeights::load(kVaeData + "tiny_vae.safetensors", kVaeData + "tiny_config.json");
  const auto shapes = vae_param_shapes(wan.config());
  auto write_without = [&](const std::string& path, const std::string& skip, const std::string& reshape) {
    std::vector<TensorRef> refs;
    for (const auto& [name, shape] : shapes) {
      if (name == skip) continue;
      Shape s = shape;
      if (name == reshape) s = {numel(shape)};
      refs.push_back({name, DType::f32, s, wan.get(name)});
    }
    write_safetensors(path, refs);
  };
  write_without(dir.file("missing.safetensors"), "decoder.middle.1.proj.bias", "");
  expect_error_holds([&] { VaeWeights::load(dir.file("missing.safetensors"), kVaeData + "tiny_config.json"); },
                     "the VAE tensor 'decoder.middle.1.proj.bias' is missing");
  write_without(dir.file("shape.safetensors"), "", "encoder.head.2.weight");
  expect_error_holds([&] { VaeWeights::load(dir.file("shape.safetensors"), kVaeData + "tiny_config.json"); },
                     "encoder.head.2.weight has shape [6912], expected [32, 8, 3, 3, 3]");
  // The tiny weights read as Wan2.1's VAE: the first tensor's shape is wrong, and the message says what to pass.
  expect_error_holds([&] { VaeWeights::load(kVaeData + "tiny_vae.pth", ""); }, "pass --vae-config");
  std::ofstream(dir.file("bad.json")) << R"({"dim": 8, "attn_scales": [0.5]})";
  expect_error_holds([&] { read_vae_config(dir.file("bad.json")); }, "attn_scales must be []");
  std::ofstream(dir.file("wan22.json")) << R"({"_class_name": "AutoencoderKLWan", "is_residual": true,
                                              "patch_size": 2, "in_channels": 3})";
  expect_error_holds([&] { read_vae_config(dir.file("wan22.json")); },
                     "in_channels is 3; it must be 3 x patch_size^2 = 12");
}

}  // namespace ms::test
