#include "model/vae_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "io/json_field.h"
#include "model/vae_name_map.h"

namespace ms {
namespace {

// Wan2.1's per-channel latent statistics (Wan's WanVAE wrapper): latents = (mu - mean) / std.
const std::vector<float> kWanMean{-0.7571f, -0.7089f, -0.9113f, 0.1075f,  -0.1745f, 0.9653f,  -0.1517f, 1.5508f,
                                  0.4134f,  -0.0715f, 0.5517f,  -0.3632f, -0.1922f, -0.9497f, 0.2503f,  -0.2921f};
const std::vector<float> kWanStd{2.8184f, 1.4541f, 2.3275f, 2.6558f, 1.2196f, 1.7708f, 2.6052f, 2.0743f,
                                 3.2687f, 2.1526f, 2.8652f, 1.5579f, 1.6382f, 1.1253f, 2.8251f, 1.9160f};

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

}  // namespace

VaeConfig::VaeConfig() : latents_mean(kWanMean), latents_std(kWanStd) {}

int64_t VaeConfig::time_stride() const {
  int64_t s = 1;
  for (bool down : temperal_downsample) s *= down ? 2 : 1;
  return s;
}

void check_vae_config(const VaeConfig& c, const std::string& what) {
  if (c.dim < 1 || c.z_dim < 1 || c.num_res_blocks < 1)
    MS_FAIL(what, ": dim, z_dim and num_res_blocks must be positive (got ", c.dim, ", ", c.z_dim, ", ",
            c.num_res_blocks, ")");
  if (c.dim_mult.empty() || c.dim_mult.size() > 4)
    MS_FAIL(what, ": dim_mult ", join(c.dim_mult), " must have 1 to 4 stages (Wan2.1: [1, 2, 4, 4])");
  for (int64_t m : c.dim_mult)
    if (m < 1) MS_FAIL(what, ": dim_mult ", join(c.dim_mult), " must hold positive multipliers");
  for (size_t i = 1; i < c.dim_mult.size(); ++i)
    if (c.dim * c.dim_mult[i] % 2)
      MS_FAIL(what, ": stage ", i, "'s width ", c.dim * c.dim_mult[i],
              " is odd; Wan's decoder halves it at each upsampler, so it must be even");
  if (!c.attn_scales.empty())
    MS_FAIL(what,
            ": attn_scales must be [] (Wan2.1's value): Wan's own cached encode and decode cannot run a VAE "
            "with attention inside its stages");
  if (c.temperal_downsample.size() + 1 != c.dim_mult.size())
    MS_FAIL(what, ": temperal_downsample has ", c.temperal_downsample.size(),
            " entries; it needs one per stage "
            "boundary, ",
            c.dim_mult.size() - 1, " for dim_mult ", join(c.dim_mult));
  if (c.time_stride() > 4)
    MS_FAIL(what, ": temperal_downsample halves time ",
            std::count(c.temperal_downsample.begin(), c.temperal_downsample.end(), true),
            " times; at most 2 halvings are possible, since Wan encodes 4 frames "
            "at a time");
  if (int64_t(c.latents_mean.size()) != c.z_dim || int64_t(c.latents_std.size()) != c.z_dim)
    MS_FAIL(what, ": latents_mean and latents_std must have z_dim = ", c.z_dim, " entries (got ", c.latents_mean.size(),
            " and ", c.latents_std.size(), ")");
  for (float s : c.latents_std)
    if (!(s > 0) || !std::isfinite(s)) MS_FAIL(what, ": latents_std must be positive and finite, got ", s);
  for (float m : c.latents_mean)
    if (!std::isfinite(m)) MS_FAIL(what, ": latents_mean must be finite, got ", m);
}

VaeConfig read_vae_config(const std::string& path) {
  VaeConfig c;
  if (path.empty()) return c;
  const nlohmann::json j =
      read_json_file(path, "the VAE config", "pass a JSON file (docs/vae.md) or omit --vae-config");
  if (!j.is_object()) MS_FAIL(path, ": a VAE config must be a JSON object");
  if (is_diffusers_vae_config(j)) return vae_config_from_diffusers(j, path);
  c.dim = json_field(j, "dim", path, c.dim);
  c.z_dim = json_field(j, "z_dim", path, c.z_dim);
  c.dim_mult = json_field(j, "dim_mult", path, c.dim_mult);
  c.num_res_blocks = json_field(j, "num_res_blocks", path, c.num_res_blocks);
  c.attn_scales = json_field(j, "attn_scales", path, c.attn_scales);
  c.temperal_downsample = json_field(j, "temperal_downsample", path, c.temperal_downsample);
  c.latents_mean = json_field(j, "latents_mean", path, c.latents_mean);
  c.latents_std = json_field(j, "latents_std", path, c.latents_std);
  static const std::set<std::string> known{
      "dim",          "z_dim",      "dim_mult", "num_res_blocks", "attn_scales", "temperal_downsample",
      "latents_mean", "latents_std"};
  warn_unknown_keys(j, known, path, "VAE config");
  check_vae_config(c, path);
  return c;
}

std::vector<VaeLayer> vae_encoder_layers(const VaeConfig& c) {
  using K = VaeLayerKind;
  std::vector<VaeLayer> out{{K::conv, "encoder.conv1", 3, c.dim}};
  int64_t n = 0, ch = c.dim;
  auto next = [&] { return "encoder.downsamples." + std::to_string(n++); };
  for (size_t stage = 0; stage < c.dim_mult.size(); ++stage) {
    const int64_t width = c.dim * c.dim_mult[stage];
    for (int64_t r = 0; r < c.num_res_blocks; ++r, ch = width) out.push_back({K::res, next(), ch, width});
    if (stage + 1 < c.dim_mult.size())
      out.push_back({c.temperal_downsample[stage] ? K::down3d : K::down2d, next(), ch, ch});
  }
  out.push_back({K::res, "encoder.middle.0", ch, ch});
  out.push_back({K::attn, "encoder.middle.1", ch, ch});
  out.push_back({K::res, "encoder.middle.2", ch, ch});
  out.push_back({K::head, "encoder.head", ch, 2 * c.z_dim});
  return out;
}

std::vector<VaeLayer> vae_decoder_layers(const VaeConfig& c) {
  using K = VaeLayerKind;
  const size_t stages = c.dim_mult.size();
  int64_t ch = c.dim * c.dim_mult.back(), n = 0;
  std::vector<VaeLayer> out{{K::conv, "decoder.conv1", c.z_dim, ch},
                            {K::res, "decoder.middle.0", ch, ch},
                            {K::attn, "decoder.middle.1", ch, ch},
                            {K::res, "decoder.middle.2", ch, ch}};
  auto next = [&] { return "decoder.upsamples." + std::to_string(n++); };
  for (size_t stage = 0; stage < stages; ++stage) {
    const int64_t width = c.dim * c.dim_mult[stages - 1 - stage];
    for (int64_t r = 0; r <= c.num_res_blocks; ++r, ch = width) out.push_back({K::res, next(), ch, width});
    if (stage + 1 < stages) {  // the upsamplers mirror the downsamplers and halve the width
      out.push_back({c.temperal_downsample[stages - 2 - stage] ? K::up3d : K::up2d, next(), ch, ch / 2});
      ch /= 2;
    }
  }
  out.push_back({K::head, "decoder.head", ch, 3});
  return out;
}

std::vector<std::pair<std::string, Shape>> vae_param_shapes(const VaeConfig& c) {
  using K = VaeLayerKind;
  std::vector<std::pair<std::string, Shape>> out;
  auto add = [&](const std::string& name, Shape s) { out.emplace_back(name, std::move(s)); };
  auto conv = [&](const std::string& p, int64_t ci, int64_t co, Shape kernel) {
    Shape w{co, ci};
    w.insert(w.end(), kernel.begin(), kernel.end());
    add(p + ".weight", w);
    add(p + ".bias", {co});
  };
  auto layers = [&](const std::vector<VaeLayer>& ls) {
    for (const auto& [kind, p, ci, co] : ls) {
      switch (kind) {
        case K::conv:
          conv(p, ci, co, {3, 3, 3});
          break;
        case K::res:
          add(p + ".residual.0.gamma", {ci, 1, 1, 1});
          conv(p + ".residual.2", ci, co, {3, 3, 3});
          add(p + ".residual.3.gamma", {co, 1, 1, 1});
          conv(p + ".residual.6", co, co, {3, 3, 3});
          if (ci != co) conv(p + ".shortcut", ci, co, {1, 1, 1});
          break;
        case K::attn:
          add(p + ".norm.gamma", {ci, 1, 1});
          conv(p + ".to_qkv", ci, 3 * ci, {1, 1});
          conv(p + ".proj", ci, ci, {1, 1});
          break;
        case K::down2d:
        case K::down3d:
          conv(p + ".resample.1", ci, co, {3, 3});
          if (kind == K::down3d) conv(p + ".time_conv", ci, ci, {3, 1, 1});
          break;
        case K::up2d:
        case K::up3d:
          conv(p + ".resample.1", ci, co, {3, 3});
          if (kind == K::up3d) conv(p + ".time_conv", ci, 2 * ci, {3, 1, 1});
          break;
        case K::head:
          add(p + ".0.gamma", {ci, 1, 1, 1});
          conv(p + ".2", ci, co, {3, 3, 3});
          break;
      }
    }
  };
  layers(vae_encoder_layers(c));
  conv("conv1", 2 * c.z_dim, 2 * c.z_dim, {1, 1, 1});
  conv("conv2", c.z_dim, c.z_dim, {1, 1, 1});
  layers(vae_decoder_layers(c));
  return out;
}

}  // namespace ms
