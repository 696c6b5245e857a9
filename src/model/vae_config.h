// Wan's video VAEs (WanVAE_ in Wan2.1's wan/modules/vae.py and in Wan2.2's wan/modules/vae2_2.py): their
// configuration, their layers in order and the names and shapes of their parameters, exactly as Wan's state dicts
// have them (docs/vae.md).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ms {

struct VaeConfig {
  int64_t dim = 96;          // base width (the encoder's)
  int64_t dec_dim = 0;       // the decoder's base width; 0: dim (Wan2.1)
  int64_t patch_size = 1;    // 2: pixels folded 2x2 into 12 channels (Wan2.2)
  bool is_residual = false;  // Wan2.2's stages: widths kept at upsamplers, averaged / duplicated shortcuts
  int64_t z_dim = 16;        // latent channels
  std::vector<int64_t> dim_mult{1, 2, 4, 4};                 // width of each stage, times dim
  int64_t num_res_blocks = 2;                                // per encoder stage (decoder: one more)
  std::vector<double> attn_scales;                           // must be empty: Wan's cached forward cannot run others
  std::vector<bool> temperal_downsample{false, true, true};  // per stage boundary (Wan's spelling)
  std::vector<float> latents_mean, latents_std;              // [z_dim] each: Wan2.1's constants by default

  VaeConfig();               // Wan2.1's VAE
  static VaeConfig wan22();  // Wan2.2's (Wan2_2_VAE): dim 160, decoder 256, 48 latent channels, 4 x 16 x 16

  int64_t decoder_dim() const { return dec_dim ? dec_dim : dim; }
  int64_t io_channels() const { return 3 * patch_size * patch_size; }  // the encoder's input, the decoder's output
  int64_t space_stride() const { return patch_size << (dim_mult.size() - 1); }  // 8 for Wan2.1, 16 for Wan2.2
  int64_t time_stride() const;                                                  // 4 for Wan2.1
  // Frames in, latent frames out: F = 1 + 4k <-> 1 + 4k / time_stride (Wan encodes 4 frames at a time).
  int64_t latent_frames(int64_t frames) const { return 1 + (frames - 1) / time_stride(); }
  int64_t video_frames(int64_t latent_frames) const { return 1 + (latent_frames - 1) * time_stride(); }
};

// The VAE's config from a JSON file with the keys of docs/vae.md (dim, dec_dim, z_dim, dim_mult, num_res_blocks,
// attn_scales, temperal_downsample, patch_size, is_residual, latents_mean, latents_std; each optional, Wan2.1's value
// when absent); "" = Wan2.1's.
// Throws ms::Error naming the file, the key and the valid values.
VaeConfig read_vae_config(const std::string& path);

// Throws ms::Error when the config cannot be run (what = where it came from, for the message).
void check_vae_config(const VaeConfig& c, const std::string& what);

// keep: the stage's input is kept for its shortcut; avg_down / dup_up: Wan2.2's AvgDown3D / DupUp3D of the kept
// input (ci channels) added to the stage's output (co channels), by factor_t in time and factor_s in space.
enum class VaeLayerKind { conv, res, attn, down2d, down3d, up2d, up3d, head, keep, avg_down, dup_up };

struct VaeLayer {
  VaeLayerKind kind;
  std::string prefix;  // state-dict prefix, e.g. "encoder.downsamples.3"
  int64_t ci, co;      // channels in, out
  int64_t factor_t = 1, factor_s = 1;
};

std::vector<VaeLayer> vae_encoder_layers(const VaeConfig& c);
std::vector<VaeLayer> vae_decoder_layers(const VaeConfig& c);

// Every parameter's name and shape, in the order of Wan's state dict.
std::vector<std::pair<std::string, Shape>> vae_param_shapes(const VaeConfig& c);

}  // namespace ms
