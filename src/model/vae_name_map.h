// diffusers' AutoencoderKLWan <-> Wan's WanVAE_: parameter names and config, read from diffusers' own
// autoencoder_kl_wan.py and scripts/convert_wan_to_diffusers.py (convert_vae, convert_vae_22); docs/vae.md has the
// tables. Every
// tensor is a pure rename (same shape, no split or fusion).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "model/vae_config.h"

namespace ms {

// Wan's name of a diffusers AutoencoderKLWan parameter of a VAE with this config (the decoder's grouped up_blocks
// depend on num_res_blocks); "" for a name that is not a diffusers one (kept as it is).
std::string wan_vae_name(const std::string& diffusers_name, const VaeConfig& c);

// Whether j is a diffusers AutoencoderKLWan config.json (its _class_name, or a base_dim key); and its VaeConfig:
// base_dim is Wan's dim, decoder_base_dim its dec_dim, the other keys keep their names (Wan2.2's: is_residual,
// patch_size, in/out_channels 12).
bool is_diffusers_vae_config(const nlohmann::json& j);
VaeConfig vae_config_from_diffusers(const nlohmann::json& j, const std::string& source);

}  // namespace ms
