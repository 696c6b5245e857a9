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

// Wan2.2's (Wan2_2_VAE in wan/modules/vae2_2.py).
const std::vector<float> kWan22Mean{-0.2289f, -0.0052f, -0.1323f, -0.2339f, -0.2799f, 0.0174f,  0.1838f,  0.1557f,
                                    -0.1382f, 0.0542f,  0.2813f,  0.0891f,  0.1570f,  -0.0098f, 0.0375f,  -0.1825f,
                                    -0.2246f, -0.1207f, -0.0698f, 0.5109f,  0.2665f,  -0.2108f, -0.2158f, 0.2502f,
                                    -0.2055f, -0.0322f, 0.1109f,  0.1567f,  -0.0729f, 0.0899f,  -0.2799f, -0.1230f,
                                    -0.0313f, -0.1649f, 0.0117f,  0.0723f,  -0.2839f, -0.2083f, -0.0520f, 0.3748f,
                                    0.0152f,  0.1957f,  0.1433f,  -0.2944f, 0.3573f,  -0.0548f, -0.1681f, -0.0667f};
const std::vector<float> kWan22Std{
    0.4765f, 1.0364f, 0.4514f, 1.1677f, 0.5313f, 0.4990f, 0.4818f, 0.5013f, 0.8158f, 1.0344f, 0.5894f, 1.0901f,
    0.6885f, 0.6165f, 0.8454f, 0.4978f, 0.5759f, 0.3523f, 0.7135f, 0.6804f, 0.5833f, 1.4146f, 0.8986f, 0.5659f,
    0.7069f, 0.5338f, 0.4889f, 0.4917f, 0.4069f, 0.4999f, 0.6866f, 0.4093f, 0.5709f, 0.6065f, 0.6415f, 0.4944f,
    0.5726f, 1.2042f, 0.5458f, 1.6887f, 0.3971f, 1.0600f, 0.3943f, 0.5537f, 0.5444f, 0.4089f, 0.7468f, 0.7744f};

// A residual stage's shortcut factors: (time, space) halvings of encoder stage i (AvgDown3D), or doublings of
// decoder stage i (DupUp3D), as vae2_2.py's Down_ResidualBlock / Up_ResidualBlock derive them.
std::pair<int64_t, int64_t> down_factors(const VaeConfig& c, size_t stage) {
  const bool down = stage + 1 < c.dim_mult.size();
  return {down && c.temperal_downsample[stage] ? 2 : 1, down ? 2 : 1};
}
std::pair<int64_t, int64_t> up_factors(const VaeConfig& c, size_t stage) {
  const size_t n = c.dim_mult.size();
  const bool up = stage + 1 < n;
  return {up && c.temperal_downsample[n - 2 - stage] ? 2 : 1, up ? 2 : 1};
}

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (int64_t x : v) s += (s.empty() ? "" : ", ") + std::to_string(x);
  return "[" + s + "]";
}

}  // namespace

VaeConfig::VaeConfig() : latents_mean(kWanMean), latents_std(kWanStd) {}

VaeConfig VaeConfig::wan22() {
  VaeConfig c;
  c.dim = 160;
  c.dec_dim = 256;
  c.z_dim = 48;
  c.patch_size = 2;
  c.is_residual = true;
  c.latents_mean = kWan22Mean;
  c.latents_std = kWan22Std;
  return c;
}

int64_t VaeConfig::time_stride() const {
  int64_t s = 1;
  for (bool down : temperal_downsample) s *= down ? 2 : 1;
  return s;
}

void check_vae_config(const VaeConfig& c, const std::string& what) {
  if (c.dim < 1 || c.z_dim < 1 || c.num_res_blocks < 1 || c.dec_dim < 0)
    MS_FAIL(what, ": dim, z_dim and num_res_blocks must be positive and dec_dim positive or 0 (got ", c.dim, ", ",
            c.z_dim, ", ", c.num_res_blocks, ", ", c.dec_dim, ")");
  if (c.patch_size != 1 && c.patch_size != 2)
    MS_FAIL(what, ": patch_size ", c.patch_size, " must be 1 (Wan2.1) or 2 (Wan2.2)");
  if (c.dim_mult.empty() || c.dim_mult.size() > 4)
    MS_FAIL(what, ": dim_mult ", join(c.dim_mult), " must have 1 to 4 stages (Wan2.1: [1, 2, 4, 4])");
  for (int64_t m : c.dim_mult)
    if (m < 1) MS_FAIL(what, ": dim_mult ", join(c.dim_mult), " must hold positive multipliers");
  for (size_t i = 1; i < c.dim_mult.size() && !c.is_residual; ++i)
    if (c.decoder_dim() * c.dim_mult[i] % 2)
      MS_FAIL(what, ": stage ", i, "'s decoder width ", c.decoder_dim() * c.dim_mult[i],
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
  if (c.is_residual)  // AvgDown3D averages whole groups of channels, DupUp3D repeats each a whole number of times
    for (const auto& layers : {vae_encoder_layers(c), vae_decoder_layers(c)})
      for (const auto& l : layers) {
        const int64_t factor = l.factor_t * l.factor_s * l.factor_s;
        if ((l.kind == VaeLayerKind::avg_down && l.ci * factor % l.co) ||
            (l.kind == VaeLayerKind::dup_up && l.co * factor % l.ci))
          MS_FAIL(what, ": ", l.prefix, " maps ", l.ci, " to ", l.co,
                  " channels; Wan2.2's residual shortcuts need the channels to regroup evenly");
      }
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
  c.dec_dim = json_field(j, "dec_dim", path, c.dec_dim);
  c.patch_size = json_field(j, "patch_size", path, c.patch_size);
  c.is_residual = json_field(j, "is_residual", path, c.is_residual);
  c.z_dim = json_field(j, "z_dim", path, c.z_dim);
  c.dim_mult = json_field(j, "dim_mult", path, c.dim_mult);
  c.num_res_blocks = json_field(j, "num_res_blocks", path, c.num_res_blocks);
  c.attn_scales = json_field(j, "attn_scales", path, c.attn_scales);
  c.temperal_downsample = json_field(j, "temperal_downsample", path, c.temperal_downsample);
  c.latents_mean = json_field(j, "latents_mean", path, c.latents_mean);
  c.latents_std = json_field(j, "latents_std", path, c.latents_std);
  static const std::set<std::string> known{
      "dim",        "dec_dim",     "z_dim",        "dim_mult",   "num_res_blocks", "attn_scales", "temperal_downsample",
      "patch_size", "is_residual", "latents_mean", "latents_std"};
  warn_unknown_keys(j, known, path, "VAE config");
  check_vae_config(c, path);
  return c;
}

std::vector<VaeLayer> vae_encoder_layers(const VaeConfig& c) {
  using K = VaeLayerKind;
  std::vector<VaeLayer> out{{K::conv, "encoder.conv1", c.io_channels(), c.dim}};
  int64_t n = 0, ch = c.dim;
  for (size_t stage = 0; stage < c.dim_mult.size(); ++stage) {
    // Wan2.1: one flat list of blocks; Wan2.2: a block per stage, holding its own list.
    const std::string block = "encoder.downsamples." + std::to_string(c.is_residual ? stage : 0);
    if (c.is_residual) n = 0;
    auto next = [&] {
      return c.is_residual ? block + ".downsamples." + std::to_string(n++)
                           : "encoder.downsamples." + std::to_string(n++);
    };
    const int64_t width = c.dim * c.dim_mult[stage], stage_in = ch;
    if (c.is_residual) out.push_back({K::keep, block, ch, ch});
    for (int64_t r = 0; r < c.num_res_blocks; ++r, ch = width) out.push_back({K::res, next(), ch, width});
    if (stage + 1 < c.dim_mult.size())
      out.push_back({c.temperal_downsample[stage] ? K::down3d : K::down2d, next(), ch, ch});
    if (c.is_residual) {
      const auto [ft, fs] = down_factors(c, stage);
      out.push_back({K::avg_down, block + ".avg_shortcut", stage_in, width, ft, fs});
    }
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
  const int64_t base = c.decoder_dim();
  int64_t ch = base * c.dim_mult.back(), n = 0;
  std::vector<VaeLayer> out{{K::conv, "decoder.conv1", c.z_dim, ch},
                            {K::res, "decoder.middle.0", ch, ch},
                            {K::attn, "decoder.middle.1", ch, ch},
                            {K::res, "decoder.middle.2", ch, ch}};
  for (size_t stage = 0; stage < stages; ++stage) {
    const std::string block = "decoder.upsamples." + std::to_string(stage);
    if (c.is_residual) n = 0;
    auto next = [&] {
      return c.is_residual ? block + ".upsamples." + std::to_string(n++) : "decoder.upsamples." + std::to_string(n++);
    };
    const int64_t width = base * c.dim_mult[stages - 1 - stage], stage_in = ch;
    const bool up = stage + 1 < stages;
    if (c.is_residual && up) out.push_back({K::keep, block, ch, ch});
    for (int64_t r = 0; r <= c.num_res_blocks; ++r, ch = width) out.push_back({K::res, next(), ch, width});
    if (up) {  // Wan2.1's upsamplers halve the width; Wan2.2's keep it
      const int64_t co = c.is_residual ? ch : ch / 2;
      out.push_back({c.temperal_downsample[stages - 2 - stage] ? K::up3d : K::up2d, next(), ch, co});
      if (c.is_residual) {
        const auto [ft, fs] = up_factors(c, stage);
        out.push_back({K::dup_up, block + ".avg_shortcut", stage_in, width, ft, fs});
      }
      ch = co;
    }
  }
  out.push_back({K::head, "decoder.head", ch, c.io_channels()});
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
    for (const auto& [kind, p, ci, co, ft, fs] : ls) {
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
        case K::keep:
        case K::avg_down:
        case K::dup_up:
          break;  // no parameters
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
