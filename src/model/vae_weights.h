// The VAE's parameters in one float32 pool, read from Wan's Wan2.1_VAE.pth, a safetensors copy of it (ComfyUI's
// wan_2.1_vae.safetensors has the same names) or diffusers' AutoencoderKLWan (a vae/ folder or its weights file;
// names mapped by vae_name_map.h), and checked against the config: every tensor present with its shape.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/vae_config.h"

namespace ms {

class VaeWeights {
 public:
  // path: a weights file or a folder holding one (diffusers' vae/ folder, whose config.json then gives the config
  // when config_path is ""); config_path: a JSON config (vae_config.h) or "" for Wan2.1's (or the folder's).
  // Throws ms::Error naming the file and the missing or mis-shaped tensor, or the bad config.
  static VaeWeights load(const std::string& path, const std::string& config_path);
  // The config load(path, config_path) uses, read without the weights (for memory checks before loading).
  static VaeConfig config_for(const std::string& path, const std::string& config_path);
  // The parameters a VAE of config c holds: count() once loaded.
  static int64_t count_for(const VaeConfig& c);

  // Random weights for tests and benchmarks: convs N(0, 1/fan_in) (the decoder's last at half that scale, so that
  // few decoded pixels reach the clamp), biases N(0, 0.05^2), gains 1 + N(0, 0.1^2).
  static VaeWeights random(const VaeConfig& config, uint64_t seed);

  const VaeConfig& config() const { return config_; }
  const float* get(const std::string& name) const;         // the tensor's values; MS_CHECKs that it exists
  int64_t count() const { return int64_t(pool_.size()); }  // parameters
  const float* data() const { return pool_.data(); }       // [count] every tensor, get(name) pointing into it
  const std::string& source() const { return source_; }    // for log lines

 private:
  VaeConfig config_;
  std::string source_;
  std::vector<float> pool_;                // every tensor, in state-dict order
  std::map<std::string, int64_t> offset_;  // name -> offset into pool_
};

}  // namespace ms
