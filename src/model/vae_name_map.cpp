#include "model/vae_name_map.h"

#include <regex>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "io/json_field.h"

namespace ms {
namespace {

// A residual block's parameter suffix: diffusers' WanResidualBlock names -> Wan's nn.Sequential indices.
std::string residual_suffix(const std::string& s) {
  static const std::pair<const char*, const char*> map[] = {{"norm1.gamma", "residual.0.gamma"},
                                                            {"conv1.", "residual.2."},
                                                            {"norm2.gamma", "residual.3.gamma"},
                                                            {"conv2.", "residual.6."},
                                                            {"conv_shortcut.", "shortcut."}};
  for (const auto& [from, to] : map)
    if (s.starts_with(from)) return to + s.substr(std::string(from).size());
  return s;  // attention and resample names are the same on both sides
}

}  // namespace

std::string wan_vae_name(const std::string& name, const VaeConfig& c) {
  if (name.starts_with("quant_conv.")) return "conv1." + name.substr(11);
  if (name.starts_with("post_quant_conv.")) return "conv2." + name.substr(16);
  static const std::regex fixed(
      R"(^(encoder|decoder)\.(conv_in|norm_out|conv_out|mid_block\.(resnets|attentions)\.(\d+))\.(.*)$)");
  static const std::regex down(R"(^encoder\.down_blocks\.(\d+)\.(.*)$)");
  static const std::regex up(R"(^decoder\.up_blocks\.(\d+)\.(resnets\.(\d+)|upsamplers\.0)\.(.*)$)");
  std::smatch m;
  if (std::regex_match(name, m, fixed)) {
    const std::string side = m[1], part = m[2], rest = m[5];
    if (part == "conv_in") return side + ".conv1." + rest;
    if (part == "norm_out") return side + ".head.0." + rest;
    if (part == "conv_out") return side + ".head.2." + rest;
    const std::string index = m[4];
    if (m[3] == "attentions" && index == "0") return side + ".middle.1." + rest;
    if (m[3] == "resnets" && (index == "0" || index == "1"))
      return side + ".middle." + (index == "0" ? "0." : "2.") + residual_suffix(rest);
    return "";
  }
  if (c.is_residual) {  // Wan2.2: a block per stage, its own list of residual blocks and then its resampler
    static const std::regex block(
        R"(^(encoder|decoder)\.(down|up)_blocks\.(\d+)\.(resnets\.(\d+)|(down|up)sampler)\.(.*)$)");
    if (!std::regex_match(name, m, block) || (m[1] == "encoder") != (m[2] == "down")) return "";
    const std::string side = m[1], list = side == "encoder" ? ".downsamples." : ".upsamples.";
    const std::string head = side + list + m[3].str() + list;
    if (m[5].matched) return head + m[5].str() + "." + residual_suffix(m[7]);
    return head + std::to_string(c.num_res_blocks + (side == "encoder" ? 0 : 1)) + "." + m[7].str();
  }
  if (std::regex_match(name, m, down)) return "encoder.downsamples." + m[1].str() + "." + residual_suffix(m[2]);
  if (std::regex_match(name, m, up)) {
    // Wan2.1's decoder.upsamples is flat: per stage num_res_blocks + 1 residual blocks, then its upsampler.
    const int64_t stage = std::stoll(m[1]), per_stage = c.num_res_blocks + 2;
    if (m[3].matched)
      return "decoder.upsamples." + std::to_string(stage * per_stage + std::stoll(m[3])) + "." + residual_suffix(m[4]);
    return "decoder.upsamples." + std::to_string(stage * per_stage + c.num_res_blocks + 1) + "." + m[4].str();
  }
  return "";
}

bool is_diffusers_vae_config(const nlohmann::json& j) {
  return j.is_object() && (j.value("_class_name", "") == "AutoencoderKLWan" || j.contains("base_dim"));
}

VaeConfig vae_config_from_diffusers(const nlohmann::json& j, const std::string& source) {
  VaeConfig c;
  c.dim = json_field(j, "base_dim", source, c.dim);
  c.z_dim = json_field(j, "z_dim", source, c.z_dim);
  c.dim_mult = json_field(j, "dim_mult", source, c.dim_mult);
  c.num_res_blocks = json_field(j, "num_res_blocks", source, c.num_res_blocks);
  c.attn_scales = json_field(j, "attn_scales", source, c.attn_scales);
  c.temperal_downsample = json_field(j, "temperal_downsample", source, c.temperal_downsample);
  c.latents_mean = json_field(j, "latents_mean", source, c.latents_mean);
  c.latents_std = json_field(j, "latents_std", source, c.latents_std);
  c.is_residual = json_field(j, "is_residual", source, false);
  if (j.contains("patch_size") && !j.at("patch_size").is_null())
    c.patch_size = json_field(j, "patch_size", source, c.patch_size);
  if (j.contains("decoder_base_dim") && !j.at("decoder_base_dim").is_null())
    c.dec_dim = json_field(j, "decoder_base_dim", source, c.dec_dim);
  for (const char* key : {"in_channels", "out_channels"})
    if (const int64_t n = json_field<int64_t>(j, key, source, 3); n != c.io_channels())
      MS_FAIL(source, ": ", key, " is ", n, "; it must be 3 x patch_size^2 = ", c.io_channels(),
              " (RGB, folded by the patch)");
  static const std::set<std::string> known{"_class_name",
                                           "_diffusers_version",
                                           "base_dim",
                                           "decoder_base_dim",
                                           "z_dim",
                                           "dim_mult",
                                           "num_res_blocks",
                                           "attn_scales",
                                           "temperal_downsample",
                                           "dropout",
                                           "latents_mean",
                                           "latents_std",
                                           "is_residual",
                                           "in_channels",
                                           "out_channels",
                                           "patch_size",
                                           "scale_factor_temporal",
                                           "scale_factor_spatial",
                                           "clip_output",
                                           "_name_or_path"};
  warn_unknown_keys(j, known, source, "AutoencoderKLWan config");
  check_vae_config(c, source);
  return c;
}

}  // namespace ms
