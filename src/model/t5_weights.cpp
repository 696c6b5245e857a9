#include "model/t5_weights.h"

#include <cmath>

#include "core/check.h"
#include "core/dtype.h"
#include "core/parallel.h"
#include "core/text.h"

namespace ms {
namespace {

// The prefix every encoder name carries in these files ("" for Wan's and plain Hugging Face files,
// "text_encoder." and the like for bundles), found from the final norm's name under either scheme.
std::string common_prefix(const std::vector<std::string>& names, bool* hf) {
  for (const char* last : {"encoder.final_layer_norm.weight", "norm.weight"})
    for (const auto& n : names)
      if (n.ends_with(last)) {
        const std::string prefix = n.substr(0, n.size() - std::string(last).size());
        if (!prefix.empty() && !prefix.ends_with(".")) continue;
        *hf = std::string(last) != "norm.weight";
        return prefix;
      }
  *hf = false;
  return "";
}

// Wan's name for a stored one: the prefix stripped, Hugging Face names mapped; "" keeps the name (not an encoder
// tensor: a full model's decoder, lm_head, or the tied alias of shared.weight when both are stored).
std::string rename_t5(const std::string& name, const std::string& prefix, bool hf, bool has_shared, bool shared_pos) {
  if (!name.starts_with(prefix)) return "";
  const std::string rest = name.substr(prefix.size());
  if (!hf) return rest == name ? "" : rest;
  if (rest == "encoder.embed_tokens.weight" && has_shared) return "";
  return wan_t5_name(rest, shared_pos);
}

// A stateless uniform draw in [-1, 1) for element i of tensor t (splitmix64 of the pair): weights fill in parallel,
// in any order, to the same values.
float uniform_pm1(uint64_t seed, uint64_t t, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + t * 0xD1B54A32D192ED03ull + i * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(double(z >> 40) * 0x1p-23 - 1.0);
}

}  // namespace

T5Weights::T5Weights(T5Weights&&) noexcept = default;
T5Weights& T5Weights::operator=(T5Weights&&) noexcept = default;
T5Weights::~T5Weights() = default;

T5Weights T5Weights::load(const std::string& path, const std::string& config_path) {
  T5Weights w;
  w.config_ = read_t5_config(config_path);
  w.source_ = path;
  w.files_ = std::make_unique<WeightFiles>(WeightFiles::open(path));
  bool hf = false;
  const std::string prefix = common_prefix(w.files_->names(), &hf);
  const bool has_shared = w.files_->find(prefix + "shared.weight") != nullptr;
  w.files_->rename([&](const std::string& n) { return rename_t5(n, prefix, hf, has_shared, w.config_.shared_pos); });
  std::vector<std::string> missing;
  for (const auto& [name, shape] : t5_param_shapes(w.config_)) {
    const TensorEntry* e = w.files_->find(name);
    if (!e) {
      missing.push_back(name);
    } else if (e->shape != shape) {
      MS_FAIL(path, ": text encoder tensor ", name, " has shape ", shape_str(e->shape), ", expected ", shape_str(shape),
              config_path.empty() ? " for umT5-XXL; pass --t5-config if this encoder has another configuration"
                                  : cat(" for the config in ", config_path));
    }
  }
  if (!missing.empty())
    MS_FAIL(path, ": ",
            missing.size() == 1 ? cat("the text encoder tensor ", quote_text(missing.front()), " is missing")
                                : cat(missing.size(), " text encoder tensors are missing, e.g. ",
                                      quote_text(missing.front()), " and ", quote_text(missing.back())),
            "; pass Wan's models_t5_umt5-xxl-enc-bf16.pth or a UMT5EncoderModel safetensors file "
            "(docs/text_encoder.md)");
  return w;
}

T5Weights T5Weights::random(const T5Config& config, uint64_t seed) {
  check_t5_config(config, "text encoder config");
  T5Weights w;
  w.config_ = config;
  w.source_ = cat("random weights (seed ", seed, ")");
  const auto shapes = t5_param_shapes(config);
  w.pool_.resize(size_t(t5_param_count(config)));
  const double d = double(config.dim), da = double(config.dim_attn), df = double(config.dim_ffn);
  const double hd = double(config.head_dim());
  int64_t offset = 0;
  for (size_t t = 0; t < shapes.size(); ++t) {
    const auto& [name, shape] = shapes[t];
    const int64_t n = numel(shape);
    // the standard deviation of t5_ref.py's random_weights; a uniform draw has it at amplitude sqrt(3) * std
    double mean = 0, std = 1;  // token embedding, position tables
    if (shape.size() == 1) {
      mean = 1, std = 0.1;  // norm gains
    } else if (name.ends_with("attn.q.weight") || name.ends_with("attn.k.weight")) {
      std = 1 / std::sqrt(d) / std::pow(hd, 0.25);
    } else if (name.ends_with("attn.o.weight")) {
      std = 1 / std::sqrt(da);
    } else if (name.ends_with("ffn.fc2.weight")) {
      std = 1 / std::sqrt(df);
    } else if (!name.ends_with("pos_embedding.embedding.weight") && name != "token_embedding.weight") {
      std = 1 / std::sqrt(d);  // v, gate.0, fc1
    }
    uint16_t* p = w.pool_.data() + offset;
    const float a = float(std::sqrt(3.0) * std), m = float(mean);
    constexpr int64_t kChunk = 1 << 16;
    parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c) {
      for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); ++i)
        p[i] = f32_to_bf16(m + a * uniform_pm1(seed, t, uint64_t(i)));
    });
    w.random_[name] = TensorEntry{name, DType::bf16, shape, reinterpret_cast<const uint8_t*>(p), n * 2};
    offset += n;
  }
  return w;
}

void T5Weights::read_rows(const std::string& name, int64_t row0, int64_t rows, float* dst) const {
  if (files_) return files_->read_rows_f32(name, row0, rows, dst);
  auto it = random_.find(name);
  MS_CHECK(it != random_.end(), "text encoder tensor ", name, " is not in the layout");
  read_as_f32(row_slice(it->second, row0, rows), dst);
}

void T5Weights::read(const std::string& name, float* dst) const {
  // every tensor of the layout has rows (load() checked the shapes); an unknown name fails in read_rows
  auto it = random_.find(name);
  const TensorEntry* e = files_ ? files_->find(name) : it != random_.end() ? &it->second : nullptr;
  read_rows(name, 0, e && !e->shape.empty() ? e->shape[0] : 1, dst);
}

std::vector<float> t5_embed(const T5Weights& w, const std::vector<int64_t>& ids) {
  const T5Config& c = w.config();
  const int64_t L = int64_t(ids.size()), d = c.dim;
  MS_CHECK(L >= 1, "the text encoder needs at least one token (EOS)");
  std::vector<float> x(size_t(L * d));  // [L, dim]
  for (int64_t i = 0; i < L; ++i) {
    if (ids[size_t(i)] < 0 || ids[size_t(i)] >= c.vocab)
      MS_FAIL("token id ", ids[size_t(i)], " is outside the text encoder's vocabulary of ", c.vocab,
              "; the tokenizer does not belong to these weights (check --tokenizer and --t5-config)");
    w.read_rows("token_embedding.weight", ids[size_t(i)], 1, x.data() + i * d);
  }
  return x;
}

void check_t5_output(const T5Weights& w, const std::vector<float>& out) {
  for (float v : out)
    if (!std::isfinite(v))
      MS_FAIL(w.source(),
              ": the text encoder's output is not finite (inf or NaN); the weights are broken or "
              "overflow float32");
}

}  // namespace ms
