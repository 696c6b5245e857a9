#include "model/t5_config.h"

#include <cmath>
#include <set>

#include "core/check.h"
#include "core/text.h"
#include "io/json_field.h"

namespace ms {

void check_t5_config(const T5Config& c, const std::string& what) {
  if (c.vocab < 3 || c.dim < 1 || c.dim_attn < 1 || c.dim_ffn < 1 || c.num_heads < 1 || c.num_layers < 1)
    MS_FAIL(what,
            ": vocab (at least 3: pad, EOS, unk), dim, dim_attn, dim_ffn, num_heads and num_layers must be "
            "positive (got ",
            c.vocab, ", ", c.dim, ", ", c.dim_attn, ", ", c.dim_ffn, ", ", c.num_heads, ", ", c.num_layers, ")");
  if (c.dim_attn % c.num_heads)
    MS_FAIL(what, ": dim_attn ", c.dim_attn, " is not a multiple of num_heads ", c.num_heads);
  if (c.num_buckets < 4 || c.num_buckets % 4)
    MS_FAIL(what, ": num_buckets ", c.num_buckets, " must be a positive multiple of 4 (umT5: 32)");
  if (c.text_len < 1) MS_FAIL(what, ": text_len ", c.text_len, " must be at least 1 (umT5 as Wan runs it: 512)");
}

T5Config read_t5_config(const std::string& path) {
  T5Config c;
  if (path.empty()) return c;
  const nlohmann::json j =
      read_json_file(path, "the text encoder config", "pass a JSON file (docs/text_encoder.md) or omit --t5-config");
  if (!j.is_object()) MS_FAIL(path, ": a text encoder config must be a JSON object");
  c.vocab = json_field(j, "vocab", path, c.vocab);
  c.dim = json_field(j, "dim", path, c.dim);
  c.dim_attn = json_field(j, "dim_attn", path, c.dim_attn);
  c.dim_ffn = json_field(j, "dim_ffn", path, c.dim_ffn);
  c.num_heads = json_field(j, "num_heads", path, c.num_heads);
  c.num_layers = json_field(j, "num_layers", path, c.num_layers);
  c.num_buckets = json_field(j, "num_buckets", path, c.num_buckets);
  c.shared_pos = json_field(j, "shared_pos", path, c.shared_pos);
  c.text_len = json_field(j, "text_len", path, c.text_len);
  static const std::set<std::string> known{"vocab",      "dim",         "dim_attn",   "dim_ffn", "num_heads",
                                           "num_layers", "num_buckets", "shared_pos", "text_len"};
  warn_unknown_keys(j, known, path, "text encoder config");
  check_t5_config(c, path);
  return c;
}

std::vector<std::pair<std::string, Shape>> t5_param_shapes(const T5Config& c) {
  const int64_t d = c.dim, da = c.dim_attn, df = c.dim_ffn;
  std::vector<std::pair<std::string, Shape>> out{{"token_embedding.weight", {c.vocab, d}}};
  if (c.shared_pos) out.push_back({"pos_embedding.embedding.weight", {c.num_buckets, c.num_heads}});
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = cat("blocks.", i, ".");
    out.push_back({p + "norm1.weight", {d}});
    for (const char* x : {"q", "k", "v"}) out.push_back({p + "attn." + x + ".weight", {da, d}});
    out.push_back({p + "attn.o.weight", {d, da}});
    out.push_back({p + "norm2.weight", {d}});
    out.push_back({p + "ffn.gate.0.weight", {df, d}});
    out.push_back({p + "ffn.fc1.weight", {df, d}});
    out.push_back({p + "ffn.fc2.weight", {d, df}});
    if (!c.shared_pos) out.push_back({p + "pos_embedding.embedding.weight", {c.num_buckets, c.num_heads}});
  }
  out.push_back({"norm.weight", {d}});
  return out;
}

int64_t t5_param_count(const T5Config& c) {
  int64_t n = 0;
  for (const auto& [name, shape] : t5_param_shapes(c)) n += numel(shape);
  return n;
}

int64_t t5_bucket(int64_t r, int64_t num_buckets) {
  constexpr double kMaxDistance = 128;
  const int64_t half = num_buckets / 2, exact = half / 2, base = r > 0 ? half : 0, n = r < 0 ? -r : r;
  if (n < exact) return base + n;  // the log below is only taken for n >= exact > 0
  const double ratio = std::log(double(n) / double(exact)) / std::log(kMaxDistance / double(exact));
  return base + std::min(half - 1, exact + int64_t(ratio * double(half - exact)));
}

namespace {

// "encoder.block.<n>.<rest>" -> n and rest; false when name is not of that form.
bool split_block(const std::string& name, int64_t* n, std::string* rest) {
  static const std::string kHead = "encoder.block.";
  if (!name.starts_with(kHead)) return false;
  size_t i = kHead.size(), j = i;
  while (j < name.size() && j - i < 6 && name[j] >= '0' && name[j] <= '9') ++j;
  if (j == i || j >= name.size() || name[j] != '.') return false;
  *n = std::stoll(name.substr(i, j - i));
  *rest = name.substr(j + 1);
  return true;
}

}  // namespace

std::string wan_t5_name(const std::string& hf_name, bool shared_pos) {
  if (hf_name == "shared.weight" || hf_name == "encoder.embed_tokens.weight") return "token_embedding.weight";
  if (hf_name == "encoder.final_layer_norm.weight") return "norm.weight";
  int64_t n;
  std::string rest;
  if (!split_block(hf_name, &n, &rest)) return "";
  const std::string p = cat("blocks.", n, ".");
  if (rest == "layer.0.layer_norm.weight") return p + "norm1.weight";
  if (rest == "layer.1.layer_norm.weight") return p + "norm2.weight";
  if (rest == "layer.0.SelfAttention.relative_attention_bias.weight")
    return shared_pos && n == 0 ? "pos_embedding.embedding.weight" : p + "pos_embedding.embedding.weight";
  for (const char* x : {"q", "k", "v", "o"})
    if (rest == cat("layer.0.SelfAttention.", x, ".weight")) return p + "attn." + x + ".weight";
  if (rest == "layer.1.DenseReluDense.wi_0.weight") return p + "ffn.gate.0.weight";  // GELU branch
  if (rest == "layer.1.DenseReluDense.wi_1.weight") return p + "ffn.fc1.weight";     // linear branch
  if (rest == "layer.1.DenseReluDense.wo.weight") return p + "ffn.fc2.weight";
  return "";
}

std::vector<int64_t> t5_offset_buckets(int64_t L, int64_t num_buckets) {
  std::vector<int64_t> bucket(size_t(2 * L - 1));
  for (int64_t r = 1 - L; r < L; ++r) bucket[size_t(r + L - 1)] = t5_bucket(r, num_buckets);
  return bucket;
}

double t5_encode_flops(const T5Config& c, int64_t L) {
  const double l = double(L), d = double(c.dim), da = double(c.dim_attn), df = double(c.dim_ffn);
  return double(c.num_layers) * (2 * l * (4 * d * da + 3 * d * df) + 4 * l * l * da);
}

}  // namespace ms
