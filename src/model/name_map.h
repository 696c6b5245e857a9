// The DiT's names in other tools' layouts: diffusers' WanTransformer3DModel (parameter names and config.json), and
// the config a ComfyUI single file implies. Taken from diffusers' own conversion
// (scripts/convert_wan_to_diffusers.py: TRANSFORMER_KEYS_RENAME_DICT, get_transformer_config) and the model's
// constructor (models/transformers/transformer_wan.py); docs/formats.md lists the map.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/config.h"

namespace ms {

// Wan name -> diffusers name, and back; "" for a name outside the map. Exact inverses on every Wan2.1 T2V name,
// the DSA offset network included (blocks.N.self_attn.offset_* <-> blocks.N.attn1.offset_*).
std::string wan_to_diffusers(const std::string& wan);
std::string diffusers_to_wan(const std::string& diffusers);

// Whether a checkpoint's names are diffusers' (it has condition_embedder.* or blocks.N.attn1.* names).
bool has_diffusers_names(const std::vector<std::string>& names);

// diffusers' transformer/config.json: whether j is one (its _class_name, or num_attention_heads without dim), and
// the conversion both ways. from: num_attention_heads x attention_head_dim = dim; in_channels, out_channels,
// text_dim, freq_dim, ffn_dim, num_layers, eps, patch_size carry over; cross_attn_norm must be true, qk_norm
// "rms_norm_across_heads", and image_dim / added_kv_proj_dim null (an image-to-video model is refused); text_len
// is Wan's 512. Our `attention` object and a text_len other than 512, which diffusers ignores, are written as extra
// keys and read back.
bool is_diffusers_config(const nlohmann::json& j);
ModelConfig config_from_diffusers(const nlohmann::json& j, const std::string& source);
nlohmann::json config_to_diffusers(const ModelConfig& c);

}  // namespace ms
