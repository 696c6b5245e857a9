#include "model/vae_weights.h"

#include <cmath>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "core/rng.h"
#include "core/text.h"
#include "io/weight_files.h"
#include "model/vae_name_map.h"

namespace ms {
namespace {

namespace fs = std::filesystem;

// Lays the config's tensors out in one pool, in state-dict order.
void lay_out(const VaeConfig& c, std::vector<float>& pool, std::map<std::string, int64_t>& offset) {
  int64_t total = 0;
  for (const auto& [name, shape] : vae_param_shapes(c)) {
    offset[name] = total;
    total += numel(shape);
  }
  pool.assign(size_t(total), 0.0f);
}

// The config file load() reads: config_path, else a folder's config.json, else none ("": Wan2.1's).
std::string config_file(const std::string& path, const std::string& config_path) {
  std::error_code ec;
  if (config_path.empty() && fs::is_directory(path, ec) && fs::exists(fs::path(path) / "config.json", ec))
    return (fs::path(path) / "config.json").string();
  return config_path;
}

// With no config file, the file's shapes tell Wan2.1's VAE (3 input channels) from Wan2.2's (12: RGB folded 2x2).
VaeConfig infer_config(const WeightFiles& files, const std::string& path) {
  auto shape = [&](const char* wan, const char* diffusers) -> Shape {
    for (const char* n : {wan, diffusers})
      if (const TensorEntry* e = files.find(n)) return e->shape;
    return {};
  };
  const Shape in = shape("encoder.conv1.weight", "encoder.conv_in.weight");
  if (in.size() != 5 || in[1] == 3) return VaeConfig();  // Wan2.1's, or a file load() names as broken
  VaeConfig c = VaeConfig::wan22();
  if (in[1] != c.io_channels())
    MS_FAIL(path, ": the VAE's first conv takes ", in[1],
            " channels; Wan2.1's takes 3 and Wan2.2's 12 (pass --vae-config "
            "for another VAE)");
  c.dim = in[0];
  if (const Shape dec = shape("decoder.conv1.weight", "decoder.conv_in.weight"); dec.size() == 5)
    c.dec_dim = dec[0] / c.dim_mult.back();
  return c;
}

}  // namespace

const float* VaeWeights::get(const std::string& name) const {
  auto it = offset_.find(name);
  MS_CHECK(it != offset_.end(), "VAE tensor ", name, " is not in the layout");
  return pool_.data() + it->second;
}

VaeWeights VaeWeights::random(const VaeConfig& config, uint64_t seed) {
  check_vae_config(config, "VAE config");
  VaeWeights v;
  v.config_ = config;
  v.source_ = cat("random weights (seed ", seed, ")");
  lay_out(config, v.pool_, v.offset_);
  Rng rng(seed);
  for (const auto& [name, shape] : vae_param_shapes(config)) {
    float* p = v.pool_.data() + v.offset_.at(name);
    const int64_t n = numel(shape);
    const bool gamma = name.ends_with(".gamma"), bias = name.ends_with(".bias");
    const double fan_in = double(n / shape[0]);
    const double gain = name == "decoder.head.2.weight" ? 0.5 : 1.0;  // most decoded pixels inside (-1, 1)
    for (int64_t i = 0; i < n; ++i) {
      const double r = rng.normal();
      p[i] = float(gamma ? 1.0 + 0.1 * r : bias ? 0.05 * r : gain * r / std::sqrt(fan_in));
    }
  }
  return v;
}

VaeConfig VaeWeights::config_for(const std::string& path, const std::string& config_path) {
  const std::string config = config_file(path, config_path);
  return config.empty() ? infer_config(WeightFiles::open(path), path) : read_vae_config(config);
}

int64_t VaeWeights::count_for(const VaeConfig& c) {
  int64_t total = 0;
  for (const auto& [name, shape] : vae_param_shapes(c)) total += numel(shape);
  return total;
}

VaeWeights VaeWeights::load(const std::string& path, const std::string& config_path) {
  const std::string config = config_file(path, config_path);
  WeightFiles files = WeightFiles::open(path);
  VaeWeights v;
  v.config_ = config.empty() ? infer_config(files, path) : read_vae_config(config);
  v.source_ = path;
  if (config.empty() && v.config_.is_residual)
    log_info("VAE ", path, ": Wan2.2's (48 latent channels, 4 x 16 x 16), told by its tensors' shapes");
  files.rename([&](const std::string& n) { return wan_vae_name(n, v.config_); });
  lay_out(v.config_, v.pool_, v.offset_);
  std::vector<std::string> missing;
  for (const auto& [name, shape] : vae_param_shapes(v.config_)) {
    const TensorEntry* e = files.find(name);
    if (!e) {
      missing.push_back(name);
      continue;
    }
    if (e->shape != shape)
      MS_FAIL(path, ": VAE tensor ", name, " has shape ", shape_str(e->shape), ", expected ", shape_str(shape),
              config.empty() ? cat(" for ", v.config_.is_residual ? "Wan2.2" : "Wan2.1",
                                   "'s VAE; pass --vae-config if this VAE has another configuration")
                             : cat(" for the config in ", config));
    files.read_f32(name, v.pool_.data() + v.offset_.at(name));
  }
  if (!missing.empty())
    MS_FAIL(path, ": ",
            missing.size() == 1 ? cat("the VAE tensor ", quote_text(missing.front()), " is missing")
                                : cat(missing.size(), " VAE tensors are missing, e.g. ", quote_text(missing.front()),
                                      " and ", quote_text(missing.back())),
            "; pass Wan2.1_VAE.pth or Wan2.2_VAE.pth, a safetensors copy of either or diffusers' AutoencoderKLWan "
            "(docs/vae.md)");
  for (size_t i = 0; i < v.pool_.size(); ++i)
    if (!std::isfinite(v.pool_[i])) MS_FAIL(path, ": the VAE weights hold a non-finite value (inf or NaN)");
  return v;
}

}  // namespace ms
