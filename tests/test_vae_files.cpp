// The VAE against files written by its owners' code (tests/data/vae/, tools/make_vae_fixtures.py): Wan's own
// WanVAE_ module's float64 outputs, torch.save'd weights, diffusers' parameter names; and bad weight files.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/dtype.h"
#include "file_util.h"
#include "io/safetensors.h"
#include "model/vae_name_map.h"
#include "temp_dir.h"
#include "test_util.h"
#include "vae/vae_model.h"

namespace ms::test {
namespace {

// diffusers' convert_vae_22 (scripts/convert_wan_to_diffusers.py) transcribed: Wan2.2's name -> diffusers'.
std::string diffusers22_name(std::string key) {
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    return at == std::string::npos ? s : s.substr(0, at) + to + s.substr(at + from.size());
  };
  static const std::pair<const char*, const char*> suffixes[] = {{".residual.0.gamma", ".norm1.gamma"},
                                                                 {".residual.2.", ".conv1."},
                                                                 {".residual.3.gamma", ".norm2.gamma"},
                                                                 {".residual.6.", ".conv2."},
                                                                 {".shortcut.", ".conv_shortcut."}};
  auto rename_suffix = [&](std::string s) {
    for (const auto& [from, to] : suffixes)
      if (s.find(from) != std::string::npos) return replace(s, from, to);
    return s;
  };
  for (const char* side : {"encoder", "decoder"}) {
    const std::string sd = side;
    if (key.starts_with(sd + ".middle.1.")) return replace(key, ".middle.1.", ".mid_block.attentions.0.");
    if (key.starts_with(sd + ".middle.0.")) return rename_suffix(replace(key, ".middle.0.", ".mid_block.resnets.0."));
    if (key.starts_with(sd + ".middle.2.")) return rename_suffix(replace(key, ".middle.2.", ".mid_block.resnets.1."));
    if (key.starts_with(sd + ".head.0.")) return replace(key, ".head.0.", ".norm_out.");
    if (key.starts_with(sd + ".head.2.")) return replace(key, ".head.2.", ".conv_out.");
    if (key.starts_with(sd + ".conv1.")) return replace(key, ".conv1.", ".conv_in.");
  }
  if (key.starts_with("conv1.")) return "quant_conv." + key.substr(6);
  if (key.starts_with("conv2.")) return "post_quant_conv." + key.substr(6);
  const bool enc = key.starts_with("encoder.");
  const std::string list = enc ? "downsamples" : "upsamples", blocks = enc ? "down_blocks" : "up_blocks";
  key = replace(key, "." + list + ".", "." + blocks + ".");
  if (key.find("residual") != std::string::npos || key.find("shortcut") != std::string::npos)
    return rename_suffix(replace(key, "." + list + ".", ".resnets."));
  std::vector<std::string> parts;
  std::stringstream ss(key);
  for (std::string part; std::getline(ss, part, '.');) parts.push_back(part);
  std::string out = parts[0] + "." + parts[1] + "." + parts[2] + "." + (enc ? "downsampler" : "upsampler");
  for (size_t i = 5; i < parts.size(); ++i) out += "." + parts[i];
  return out;
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

// Every Wan2.2 VAE tensor, renamed as diffusers' convert_vae_22 renames it, maps back one to one; and diffusers'
// Wan2.2 config.json (the script's vae22_diffusers_config) reads as Wan2.2's VAE.
TEST(VaeFiles, Wan22DiffusersNamesAndConfigMapOntoWans) {
  const VaeConfig c = VaeConfig::wan22();
  std::set<std::string> seen;
  for (const auto& [name, shape] : vae_param_shapes(c)) {
    const std::string d = diffusers22_name(name);
    EXPECT_NE(d, name);
    EXPECT_EQ(wan_vae_name(d, c), name) << d;
    EXPECT_TRUE(seen.insert(d).second) << d;
  }
  EXPECT_EQ(diffusers22_name("encoder.downsamples.2.downsamples.2.time_conv.bias"),
            "encoder.down_blocks.2.downsampler.time_conv.bias");  // the transcription itself, on one row
  EXPECT_EQ(wan_vae_name("decoder.up_blocks.1.upsampler.resample.1.weight", c),
            "decoder.upsamples.1.upsamples.3.resample.1.weight");

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

// A Wan2.2 VAE file without a config: its 12-channel first conv tells it apart, its widths come from the shapes, and
// in diffusers' names it loads to the same weights.
TEST(VaeFiles, Wan22ConfigComesFromTheFilesShapes) {
  VaeConfig c = VaeConfig::wan22();
  c.dim = 8;
  c.dec_dim = 12;
  const VaeWeights w = VaeWeights::random(c, 5);
  TempDir dir;
  std::vector<TensorRef> wan, dif;
  for (const auto& [name, shape] : vae_param_shapes(c)) {
    wan.push_back({name, DType::f32, shape, w.get(name)});
    dif.push_back({diffusers22_name(name), DType::f32, shape, w.get(name)});
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
