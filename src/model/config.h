// Model configuration: Wan2.1's config.json plus our `attention` object (docs/model.md, docs/attention.md).
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/enum_names.h"

namespace ms {

// The self-attention core of every block (docs/attention.md).
enum class AttentionType { dense, window, dsa, dsa_fixed };

template <>
struct EnumNames<AttentionType> {  // in configs, on the command line and in reports
  static constexpr std::array<EnumName<AttentionType>, 4> values{{{AttentionType::dense, "dense"},
                                                                  {AttentionType::window, "window"},
                                                                  {AttentionType::dsa, "dsa"},
                                                                  {AttentionType::dsa_fixed, "dsa_fixed"}}};
};

struct AttentionConfig {
  AttentionType type = AttentionType::dense;
  std::array<int64_t, 3> window{3, 3, 3};             // kt, kh, kw (tokens)
  bool shift = true;                                  // window: shift odd blocks
  int64_t offset_groups = 0;                          // dsa: G; 0 means num_heads
  std::array<double, 3> offset_range{1.0, 2.0, 2.0};  // dsa: max |offset| per axis (t, h, w), tokens

  int64_t slots() const { return window[0] * window[1] * window[2]; }  // P, DSA sample slots per query
  bool has_offsets() const { return type == AttentionType::dsa; }      // the offset network exists
  bool is_dsa() const {                                                // run by the DSA kernels
    return type == AttentionType::dsa || type == AttentionType::dsa_fixed;
  }
};

struct ModelConfig {
  std::string model_type = "t2v";
  int64_t dim = 0, ffn_dim = 0, num_heads = 0, num_layers = 0;
  int64_t in_dim = 16, out_dim = 16, text_len = 512, text_dim = 4096, freq_dim = 256;
  double eps = 1e-6;
  std::array<int64_t, 3> patch_size{1, 2, 2};
  AttentionConfig attention;

  int64_t head_dim() const { return dim / num_heads; }
  int64_t patch_volume() const { return patch_size[0] * patch_size[1] * patch_size[2]; }
  int64_t groups() const { return attention.offset_groups ? attention.offset_groups : num_heads; }
  // Throws ms::Error naming the contradictory value and the fix.
  void validate() const;
  // Throws ms::Error, naming `option`, unless the model takes an image as its clean first latent frame (TI2V, one
  // latent frame per token frame).
  void require_image_frame(const std::string& option) const;
};

// Parses Wan's config.json form. `source` names the file in messages. Keys real Wan2.1 configs carry
// (_class_name, _diffusers_version, window_size, qk_norm, cross_attn_norm, ...) are accepted; other unknown
// keys draw a warning naming them.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source);
// A config.json in Wan's form or in diffusers' (model/name_map.h), told apart by its keys.
ModelConfig load_config(const std::string& path);
nlohmann::json config_to_json(const ModelConfig& c);

// What a preset's owner generates with (Wan's wan/configs/*.py): plan's defaults when not told.
struct PresetDefaults {
  int64_t frames = 81, height = 480, width = 832;
  std::array<int64_t, 3> vae_stride{4, 8, 8};
};

// Presets (docs/model.md): tiny, tiny-t4 (the default training job, pixel space), Wan's models (wan2.1-t2v-1.3b and
// wan2.1-t2v-14b, also named wan2.1-1.3b and wan2.1-14b; wan2.2-t2v-a14b, one expert; wan2.2-ti2v-5b) and the
// paper's scale points. Throws ms::Error listing the presets for an unknown name.
ModelConfig preset_config(const std::string& name);
PresetDefaults preset_defaults(const std::string& name);
std::vector<std::string> preset_names();
bool is_preset(const std::string& name);

}  // namespace ms
