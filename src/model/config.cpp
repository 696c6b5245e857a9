#include "model/config.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/text.h"
#include "io/json_field.h"
#include "model/name_map.h"

namespace ms {

void ModelConfig::validate() const {
  if (model_type != "t2v" && model_type != "ti2v")
    MS_FAIL("model_type ", quote_text(model_type),
            " is not supported: megaslide trains text-to-video models (t2v: Wan2.1 T2V and Wan2.2 T2V-A14B; ti2v: "
            "Wan2.2 TI2V-5B)");
  auto positive = [](const char* name, int64_t v) {
    if (v <= 0) MS_FAIL("config: ", name, " must be positive, got ", v);
  };
  positive("dim", dim);
  positive("ffn_dim", ffn_dim);
  positive("num_heads", num_heads);
  positive("num_layers", num_layers);
  positive("in_dim", in_dim);
  positive("out_dim", out_dim);
  positive("text_len", text_len);
  positive("text_dim", text_dim);
  positive("freq_dim", freq_dim);
  for (int64_t p : patch_size) positive("patch_size", p);
  if (dim % num_heads)
    MS_FAIL("config: dim ", dim, " is not divisible by num_heads ", num_heads, "; choose num_heads dividing dim");
  if (head_dim() % 2) MS_FAIL("config: head dim ", head_dim(), " (dim/num_heads) must be even for RoPE");
  if (head_dim() < 6) MS_FAIL("config: head dim ", head_dim(), " is below 6; 3D RoPE needs at least one pair per axis");
  if (freq_dim % 2) MS_FAIL("config: freq_dim ", freq_dim, " must be even");
  if (!(eps > 0)) MS_FAIL("config: eps must be positive, got ", eps);
  const auto& a = attention;
  static const char* axes[3] = {"t", "h", "w"};
  for (size_t i = 0; i < 3; ++i)
    if (a.window[i] <= 0)
      MS_FAIL("config: attention.window[", i, "] (", axes[i], ") is ", a.window[i], "; window sizes must be positive");
  if (a.offset_groups < 0 || (a.offset_groups && num_heads % a.offset_groups))
    MS_FAIL("config: attention.offset_groups ", a.offset_groups, " must divide num_heads ", num_heads,
            " (0 means one group per head)");
  for (size_t i = 0; i < 3; ++i) {
    const double r = a.offset_range[i];
    if (a.has_offsets() ? !(r > 0) : !(r >= 0))
      MS_FAIL("config: attention.offset_range[", i, "] (", axes[i], ") is ", r, "; it must be ",
              a.has_offsets() ? "positive for dsa" : ">= 0");
  }
}

namespace {

AttentionConfig attention_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) MS_FAIL(source, ": 'attention' must be an object");
  AttentionConfig a;
  a.type = parse_name<AttentionType>(json_field(j, "type", source, std::string(name_of(a.type))),
                                     source + ": attention.type");
  a.window = json_field(j, "window", source, a.window);
  a.shift = json_field(j, "shift", source, a.shift);
  a.offset_groups = json_field(j, "offset_groups", source, a.offset_groups);
  a.offset_range = json_field(j, "offset_range", source, a.offset_range);
  for (const auto& [k, v] : j.items())
    if (k != "type" && k != "window" && k != "shift" && k != "offset_groups" && k != "offset_range")
      log_warn(source, ": unknown key ", quote_text("attention." + k), " ignored");
  return a;
}

}  // namespace

void ModelConfig::require_image_frame(const std::string& option) const {
  if (model_type != "ti2v" || patch_size[0] != 1)
    MS_FAIL(option,
            " is for TI2V models (model_type \"ti2v\", e.g. wan2.2-ti2v-5b), which take the image as the "
            "clean first latent frame; this model's model_type is \"",
            model_type, "\"");
}

ModelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) MS_FAIL(source, ": a model config must be a JSON object");
  ModelConfig c;
  c.model_type = json_field(j, "model_type", source, c.model_type);
  c.dim = json_field(j, "dim", source, c.dim);
  c.ffn_dim = json_field(j, "ffn_dim", source, c.ffn_dim);
  c.num_heads = json_field(j, "num_heads", source, c.num_heads);
  c.num_layers = json_field(j, "num_layers", source, c.num_layers);
  c.in_dim = json_field(j, "in_dim", source, c.in_dim);
  c.out_dim = json_field(j, "out_dim", source, c.out_dim);
  c.text_len = json_field(j, "text_len", source, c.text_len);
  c.text_dim = json_field(j, "text_dim", source, c.text_dim);
  c.freq_dim = json_field(j, "freq_dim", source, c.freq_dim);
  c.eps = json_field(j, "eps", source, c.eps);
  c.patch_size = json_field(j, "patch_size", source, c.patch_size);
  if (j.contains("attention")) c.attention = attention_from_json(j.at("attention"), source);
  // Wan's own switches: we implement the values every released Wan2.1 model uses.
  if (!json_field(j, "qk_norm", source, true)) MS_FAIL(source, ": qk_norm=false is not supported (Wan2.1 uses true)");
  if (!json_field(j, "cross_attn_norm", source, true))
    MS_FAIL(source, ": cross_attn_norm=false is not supported (Wan2.1 uses true)");
  auto ws = json_field(j, "window_size", source, std::array<int64_t, 2>{-1, -1});
  if (ws[0] != -1 || ws[1] != -1)
    MS_FAIL(source,
            ": window_size other than [-1, -1] is not supported; use the 'attention' object for local attention");
  static const std::set<std::string> known{
      "model_type",   "dim",      "ffn_dim",         "num_heads",   "num_layers",  "in_dim",
      "out_dim",      "text_len", "text_dim",        "freq_dim",    "eps",         "patch_size",
      "attention",    "qk_norm",  "cross_attn_norm", "window_size", "_class_name", "_diffusers_version",
      "_name_or_path"};
  warn_unknown_keys(j, known, source, "config");
  c.validate();
  return c;
}

ModelConfig load_config(const std::string& path) {
  const nlohmann::json j = read_json_file(path, "model config", "pass a config.json or a preset name");
  return is_diffusers_config(j) ? config_from_diffusers(j, path) : config_from_json(j, path);
}

nlohmann::json config_to_json(const ModelConfig& c) {
  nlohmann::json j{{"_class_name", "WanModel"}, {"model_type", c.model_type}, {"dim", c.dim},
                   {"ffn_dim", c.ffn_dim},      {"num_heads", c.num_heads},   {"num_layers", c.num_layers},
                   {"in_dim", c.in_dim},        {"out_dim", c.out_dim},       {"text_len", c.text_len},
                   {"text_dim", c.text_dim},    {"freq_dim", c.freq_dim},     {"eps", c.eps},
                   {"patch_size", c.patch_size}};
  const auto& a = c.attention;
  j["attention"] = {{"type", name_of(a.type)},
                    {"window", a.window},
                    {"shift", a.shift},
                    {"offset_groups", a.offset_groups},
                    {"offset_range", a.offset_range}};
  return j;
}

namespace {
struct Preset {
  const char* name;
  const char* alias;  // the name it had before the third wave, or null
  int64_t dim, ffn_dim, heads, layers, in_dim, text_len, text_dim, freq_dim;
  AttentionType attention = AttentionType::dense;
  int64_t offset_groups = 0;  // dsa: G (0: one per head)
  std::array<int64_t, 3> patch = {1, 2, 2};
  const char* model_type = "t2v";
  PresetDefaults video = {};
};
// Wan's own configs (Wan2.1 and Wan2.2: wan/configs/*.py). Wan2.2's T2V-A14B is two experts of Wan2.1-T2V-14B's
// shape; its TI2V-5B has 48 latent channels in and out (the Wan2.2 VAE's) and generates 121 frames at 704 x 1280.
constexpr Preset kPresets[] = {
    {"tiny", nullptr, 96, 256, 3, 3, 3, 16, 64, 64},
    // The default job's model (docs/results.md): a token holds its 2 x 2 pixels through 4 frames, so that the
    // captioned motion is a pattern within a token, which this small a model learns in minutes.
    {"tiny-t4", nullptr, 96, 256, 3, 3, 3, 16, 64, 64, AttentionType::dense, 0, {4, 2, 2}},
    {"wan2.1-t2v-1.3b", "wan2.1-1.3b", 1536, 8960, 12, 30, 16, 512, 4096, 256},
    {"wan2.1-t2v-14b", "wan2.1-14b", 5120, 13824, 40, 40, 16, 512, 4096, 256},
    {"wan2.2-t2v-a14b",
     nullptr,
     5120,
     13824,
     40,
     40,
     16,
     512,
     4096,
     256,
     AttentionType::dense,
     0,
     {1, 2, 2},
     "t2v",
     {81, 720, 1280, {4, 8, 8}}},
    {"wan2.2-ti2v-5b",
     nullptr,
     3072,
     14336,
     24,
     30,
     48,
     512,
     4096,
     256,
     AttentionType::dense,
     0,
     {1, 2, 2},
     "ti2v",
     {121, 704, 1280, {4, 16, 16}}},
    // The paper's scale points, Wan-shaped (head dim 128, ffn ~2.7 dim): 28.34 B, 33.26 B parameters; the 105 B
    // model with its DSA offset networks, two offset groups (104.88 B + 0.14 B: 14 B/param is the paper's 1.47 TB).
    {"megaslide-28b", nullptr, 5120, 13824, 40, 80, 16, 512, 4096, 256},
    {"megaslide-33b", nullptr, 6144, 16640, 48, 65, 16, 512, 4096, 256},
    {"megaslide-105b", nullptr, 10240, 27648, 80, 74, 16, 512, 4096, 256, AttentionType::dsa, 2},
};

const Preset* find_preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name || (p.alias && name == p.alias)) return &p;
  return nullptr;
}

[[noreturn]] void unknown_preset(const std::string& name) {
  std::string all;
  for (const auto& n : preset_names()) all += " " + n;
  MS_FAIL("unknown model preset '", name, "'; presets:", all);
}
}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> v;
  for (const auto& p : kPresets) v.push_back(p.name);
  return v;
}

bool is_preset(const std::string& name) { return find_preset(name) != nullptr; }

ModelConfig preset_config(const std::string& name) {
  const Preset* p = find_preset(name);
  if (!p) unknown_preset(name);
  ModelConfig c;
  c.model_type = p->model_type;
  c.dim = p->dim;
  c.ffn_dim = p->ffn_dim;
  c.num_heads = p->heads;
  c.num_layers = p->layers;
  c.in_dim = c.out_dim = p->in_dim;
  c.text_len = p->text_len;
  c.text_dim = p->text_dim;
  c.freq_dim = p->freq_dim;
  c.attention.type = p->attention;
  c.attention.offset_groups = p->offset_groups;
  c.patch_size = p->patch;
  c.validate();
  return c;
}

PresetDefaults preset_defaults(const std::string& name) {
  const Preset* p = find_preset(name);
  if (!p) unknown_preset(name);
  return p->video;
}

}  // namespace ms
