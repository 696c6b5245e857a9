#include "model/name_map.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"

namespace ms {

namespace {

struct Pair {
  const char* wan;
  const char* diffusers;
};

// Inside blocks.N.: a key ending in '.' maps the names it prefixes, any other key maps exactly.
constexpr Pair kBlock[] = {
    {"self_attn.q.", "attn1.to_q."},
    {"self_attn.k.", "attn1.to_k."},
    {"self_attn.v.", "attn1.to_v."},
    {"self_attn.o.", "attn1.to_out.0."},
    {"self_attn.norm_q.", "attn1.norm_q."},
    {"self_attn.norm_k.", "attn1.norm_k."},
    {"self_attn.offset_conv.", "attn1.offset_conv."},
    {"self_attn.offset_proj.", "attn1.offset_proj."},
    {"cross_attn.q.", "attn2.to_q."},
    {"cross_attn.k.", "attn2.to_k."},
    {"cross_attn.v.", "attn2.to_v."},
    {"cross_attn.o.", "attn2.to_out.0."},
    {"cross_attn.norm_q.", "attn2.norm_q."},
    {"cross_attn.norm_k.", "attn2.norm_k."},
    {"norm3.", "norm2."},  // Wan's affine cross-attention norm is diffusers' norm2
    {"ffn.0.", "ffn.net.0.proj."},
    {"ffn.2.", "ffn.net.2."},
    {"modulation", "scale_shift_table"},
};

constexpr Pair kTop[] = {
    {"patch_embedding.", "patch_embedding."},
    {"text_embedding.0.", "condition_embedder.text_embedder.linear_1."},
    {"text_embedding.2.", "condition_embedder.text_embedder.linear_2."},
    {"time_embedding.0.", "condition_embedder.time_embedder.linear_1."},
    {"time_embedding.2.", "condition_embedder.time_embedder.linear_2."},
    {"time_projection.1.", "condition_embedder.time_proj."},
    {"head.head.", "proj_out."},
    {"head.modulation", "scale_shift_table"},
};

// `rest` mapped through table, from side `from` (0 = wan, 1 = diffusers) to the other; "" when nothing matches.
std::string map_rest(const std::string& rest, const Pair* table, size_t n, bool from_diffusers) {
  for (size_t i = 0; i < n; ++i) {
    const std::string from = from_diffusers ? table[i].diffusers : table[i].wan;
    const std::string to = from_diffusers ? table[i].wan : table[i].diffusers;
    if (from.back() == '.' ? rest.starts_with(from) && rest.size() > from.size() : rest == from)
      return to + rest.substr(from.size());
  }
  return {};
}

std::string map_name(const std::string& name, bool from_diffusers) {
  if (name.starts_with("blocks.")) {  // blocks.<digits>.<rest>
    size_t i = 7;
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    if (i == 7 || i >= name.size() || name[i] != '.') return {};
    const std::string rest = map_rest(name.substr(i + 1), kBlock, std::size(kBlock), from_diffusers);
    return rest.empty() ? rest : name.substr(0, i + 1) + rest;
  }
  return map_rest(name, kTop, std::size(kTop), from_diffusers);
}

}  // namespace

std::string wan_to_diffusers(const std::string& wan) { return map_name(wan, false); }
std::string diffusers_to_wan(const std::string& diffusers) { return map_name(diffusers, true); }

bool has_diffusers_names(const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (n.starts_with("condition_embedder.") || n.starts_with("proj_out.") ||
        (n.starts_with("blocks.") && (n.find(".attn1.") != std::string::npos || n.find(".attn2.") != std::string::npos)))
      return true;
  return false;
}

bool is_diffusers_config(const nlohmann::json& j) {
  if (!j.is_object()) return false;
  if (j.contains("_class_name") && j.at("_class_name") == "WanTransformer3DModel") return true;
  return j.contains("num_attention_heads") && !j.contains("dim");
}

ModelConfig config_from_diffusers(const nlohmann::json& j, const std::string& source) {
  // Read through the Wan form, so each value is type-checked in one place (config_from_json).
  nlohmann::json wan = nlohmann::json::object();
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!j.contains(key)) MS_FAIL(source, ": a diffusers WanTransformer3DModel config without '", key, "'");
    return j.at(key);
  };
  const nlohmann::json& heads = need("num_attention_heads");
  const nlohmann::json& head_dim = need("attention_head_dim");
  if (!heads.is_number_integer() || !head_dim.is_number_integer() || heads.get<int64_t>() <= 0 ||
      head_dim.get<int64_t>() <= 0 || heads.get<int64_t>() > (int64_t(1) << 20) || head_dim.get<int64_t>() > (int64_t(1) << 20))
    MS_FAIL(source, ": num_attention_heads and attention_head_dim must be positive integers");
  wan["num_heads"] = heads;
  wan["dim"] = heads.get<int64_t>() * head_dim.get<int64_t>();
  for (const auto& [from, to] : {std::pair{"in_channels", "in_dim"}, {"out_channels", "out_dim"}, {"text_dim", "text_dim"},
                                 {"freq_dim", "freq_dim"}, {"ffn_dim", "ffn_dim"}, {"num_layers", "num_layers"},
                                 {"eps", "eps"}, {"patch_size", "patch_size"}, {"attention", "attention"},
                                 {"text_len", "text_len"}})
    if (j.contains(from) && !j.at(from).is_null()) wan[to] = j.at(from);
  if (j.contains("cross_attn_norm") && j.at("cross_attn_norm") != true)
    MS_FAIL(source, ": cross_attn_norm other than true is not supported (Wan2.1 uses true)");
  if (j.contains("qk_norm") && j.at("qk_norm") != "rms_norm_across_heads")
    MS_FAIL(source, ": qk_norm ", escape_text(j.at("qk_norm").dump()), " is not supported (Wan2.1 uses \"rms_norm_across_heads\")");
  for (const char* key : {"image_dim", "added_kv_proj_dim", "pos_embed_seq_len"})
    if (j.contains(key) && !j.at(key).is_null())
      MS_FAIL(source, ": '", key, "' is set, so this is an image-to-video model; megaslide trains text-to-video only");
  static const char* known[] = {"_class_name", "_diffusers_version", "_name_or_path", "num_attention_heads",
                                "attention_head_dim", "in_channels", "out_channels", "text_dim", "freq_dim",
                                "ffn_dim", "num_layers", "eps", "patch_size", "attention", "cross_attn_norm",
                                "qk_norm", "image_dim", "added_kv_proj_dim", "pos_embed_seq_len", "rope_max_seq_len",
                                "window_size", "text_len"};
  std::string unknown;
  for (const auto& [k, v] : j.items())
    if (std::find(std::begin(known), std::end(known), k) == std::end(known))
      unknown += (unknown.empty() ? "" : ", ") + quote_text(k);
  if (!unknown.empty()) log_warn(source, ": unknown config keys ignored: ", unknown);
  return config_from_json(wan, source);
}

nlohmann::json config_to_diffusers(const ModelConfig& c) {
  nlohmann::json j{{"_class_name", "WanTransformer3DModel"},
                   {"_diffusers_version", "0.33.1"},
                   {"added_kv_proj_dim", nullptr},
                   {"attention_head_dim", c.head_dim()},
                   {"cross_attn_norm", true},
                   {"eps", c.eps},
                   {"ffn_dim", c.ffn_dim},
                   {"freq_dim", c.freq_dim},
                   {"image_dim", nullptr},
                   {"in_channels", c.in_dim},
                   {"num_attention_heads", c.num_heads},
                   {"num_layers", c.num_layers},
                   {"out_channels", c.out_dim},
                   {"patch_size", c.patch_size},
                   {"qk_norm", "rms_norm_across_heads"},
                   {"rope_max_seq_len", 1024},
                   {"text_dim", c.text_dim}};
  // Not diffusers keys (it ignores them, with a warning); written only where they differ from what it assumes.
  if (c.text_len != 512) j["text_len"] = c.text_len;
  if (c.attention.type != AttentionType::dense) j["attention"] = config_to_json(c)["attention"];
  return j;
}

}  // namespace ms
