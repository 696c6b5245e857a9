// Wan2.1's video VAE (WanVAE_ in Wan's wan/modules/vae.py): its configuration, its layers in order and the names
// and shapes of its parameters, exactly as Wan's state dict has them (docs/vae.md).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ms {

struct VaeConfig {
  int64_t dim = 96;                                          // base width
  int64_t z_dim = 16;                                        // latent channels
  std::vector<int64_t> dim_mult{1, 2, 4, 4};                 // width of each stage, times dim
  int64_t num_res_blocks = 2;                                // per encoder stage (decoder: one more)
  std::vector<double> attn_scales;                           // must be empty: Wan's cached forward cannot run others
  std::vector<bool> temperal_downsample{false, true, true};  // per stage boundary (Wan's spelling)
  std::vector<float> latents_mean, latents_std;              // [z_dim] each: Wan2.1's constants by default

  VaeConfig();  // Wan2.1's VAE

  int64_t space_stride() const { return int64_t(1) << (dim_mult.size() - 1); }  // 8 for Wan2.1
  int64_t time_stride() const;                                                  // 4 for Wan2.1
  // Frames in, latent frames out: F = 1 + 4k <-> 1 + 4k / time_stride (Wan encodes 4 frames at a time).
  int64_t latent_frames(int64_t frames) const { return 1 + (frames - 1) / time_stride(); }
  int64_t video_frames(int64_t latent_frames) const { return 1 + (latent_frames - 1) * time_stride(); }
};

// The VAE's config from a JSON file with the keys of docs/vae.md (dim, z_dim, dim_mult, num_res_blocks, attn_scales,
// temperal_downsample, latents_mean, latents_std; each optional, Wan2.1's value when absent); "" = Wan2.1's.
// Throws ms::Error naming the file, the key and the valid values.
VaeConfig read_vae_config(const std::string& path);

// Throws ms::Error when the config cannot be run (what = where it came from, for the message).
void check_vae_config(const VaeConfig& c, const std::string& what);

enum class VaeLayerKind { conv, res, attn, down2d, down3d, up2d, up3d, head };

struct VaeLayer {
  VaeLayerKind kind;
  std::string prefix;  // state-dict prefix, e.g. "encoder.downsamples.3"
  int64_t ci, co;      // channels in, out
};

std::vector<VaeLayer> vae_encoder_layers(const VaeConfig& c);
std::vector<VaeLayer> vae_decoder_layers(const VaeConfig& c);

// Every parameter's name and shape, in the order of Wan's state dict.
std::vector<std::pair<std::string, Shape>> vae_param_shapes(const VaeConfig& c);

}  // namespace ms
