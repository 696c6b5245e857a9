// `megaslide vae encode|decode`: Wan2.1's video VAE on safetensors tensors (docs/vae.md): `video` [B, 3, F, H, W] in
// [-1, 1] <-> `latents` [B, 16, 1 + (F - 1) / 4, H / 8, W / 8], the normalised latent mean as Wan's WanVAE returns it.
#include <chrono>
#include <cmath>
#include <memory>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/units.h"
#include "io/safetensors.h"
#include "registry/frozen_models.h"
#include "vae/vae_model.h"

namespace ms::cli {
namespace {

struct VaeArgs {
  std::string vae, config, input, out;
  VaeChunking chunking;
  BackendChoice backend = BackendChoice::automatic;
  int64_t host_memory = 0;  // --host-memory; 0: detected
};

// The one tensor `name` of a safetensors file as f32, and its shape; non-finite values are an error.
std::vector<float> read_input(const std::string& path, const std::string& name, Shape& shape) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  const TensorEntry* e = f.find(name);
  if (!e) {
    std::string held;
    for (const auto& t : f.entries()) held += (held.empty() ? "" : ", ") + quote_text(t.name);
    MS_FAIL(path, ": no tensor '", name, "' (it holds ", held.empty() ? "none" : held, ")");
  }
  shape = e->shape;
  std::vector<float> v(size_t(numel(shape)));
  read_as_f32(*e, v.data());
  for (float x : v)
    if (!std::isfinite(x)) MS_FAIL(path, ": '", name, "' holds a non-finite value (inf or NaN)");
  return v;
}

void run_vae(const VaeArgs& a, bool encode) {
  const BackendKind backend = resolve_gpu_backend(a.backend);
  check_vae_tile(a.chunking, "--vae-tile");
  const VaeWeights w = VaeWeights::load(a.vae, a.config);
  const VaeConfig& c = w.config();
  log_info("VAE from ", a.vae, ": ", format_fixed(double(w.count()) / 1e6, 1), " M parameters; backend ", backend);
  Shape in_shape, out_shape;
  const std::vector<float> in = read_input(a.input, encode ? "video" : "latents", in_shape);
  const int64_t s = c.space_stride();
  if (encode) {
    if (in_shape.size() != 5 || in_shape[1] != 3)
      MS_FAIL(a.input, ": 'video' has shape ", shape_str(in_shape), "; vae encode takes [B, 3, F, H, W] in [-1, 1]");
    check_vae_video_shape(c, in_shape[2], in_shape[3], in_shape[4], a.input + ": 'video'");
    out_shape = {in_shape[0], c.z_dim, c.latent_frames(in_shape[2]), in_shape[3] / s, in_shape[4] / s};
  } else {
    if (in_shape.size() != 5 || in_shape[1] != c.z_dim || in_shape[2] < 1 || in_shape[3] < 1 || in_shape[4] < 1)
      MS_FAIL(a.input, ": 'latents' has shape ", shape_str(in_shape), "; vae decode takes [B, ", c.z_dim,
              ", T, h, w] (", c.z_dim, " = the VAE's z_dim)");
    out_shape = {in_shape[0], 3, c.video_frames(in_shape[2]), in_shape[3] * s, in_shape[4] * s};
  }
  const int64_t F = encode ? in_shape[2] : out_shape[2], H = encode ? in_shape[3] : out_shape[3];
  const int64_t W = encode ? in_shape[4] : out_shape[4];
  check_vae_fits(c, encode, F, H, W, a.chunking, host_limit(a.host_memory), encode ? "vae encode" : "vae decode");
  std::vector<float> out(size_t(numel(out_shape)));
  const std::unique_ptr<VaeOps> ops = make_vae_ops(backend, w);
  const int64_t in_item = numel(in_shape) / in_shape[0], out_item = numel(out_shape) / out_shape[0];
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t b = 0; b < in_shape[0]; ++b) {
    if (encode)
      vae_encode(*ops, in.data() + b * in_item, in_shape[2], in_shape[3], in_shape[4], out.data() + b * out_item,
                 a.chunking);
    else
      vae_decode(*ops, in.data() + b * in_item, in_shape[2], in_shape[3], in_shape[4], out.data() + b * out_item,
                 a.chunking);
    if (in_shape[0] > 1) log_info(encode ? "encoded" : "decoded", " clip ", b + 1, " of ", in_shape[0]);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t frames = in_shape[0] * (encode ? in_shape[2] : out_shape[2]);
  write_safetensors(a.out, {{encode ? "latents" : "video", DType::f32, out_shape, out.data()}});
  log_info("wrote ", a.out, ": ", encode ? "latents " : "video ", shape_str(out_shape), "; ", frames, " frames in ",
           format_fixed(seconds, 2), " s (", format_fixed(seconds > 0 ? double(frames) / seconds : 0.0, 2),
           " frames/s), peak memory ", format_bytes(double(peak_resident_bytes())));
}

void add_vae_verb(CLI::App& vae, bool encode) {
  auto args = std::make_shared<VaeArgs>();
  CLI::App* cmd = vae.add_subcommand(encode ? "encode" : "decode",
                                     encode ? "Videos [B, 3, F, H, W] in [-1, 1] -> normalised latents"
                                            : "Normalised latents [B, z, T, h, w] -> videos clamped to [-1, 1]");
  cmd->add_option("--vae", args->vae,
                  "Wan2.1_VAE.pth or Wan2.2_VAE.pth, a safetensors copy (ComfyUI's wan_2.1_vae.safetensors) or "
                  "diffusers' AutoencoderKLWan (its vae/ folder or weights file)")
      ->required();
  cmd->add_option("--vae-config", args->config,
                  "JSON config (dim, dec_dim, z_dim, dim_mult, num_res_blocks, attn_scales, temperal_downsample, "
                  "patch_size, is_residual, latents_mean, latents_std); default: a diffusers folder's config.json, "
                  "else Wan2.1's or Wan2.2's as the file's shapes tell");
  cmd->add_option("--input", args->input,
                  encode
                      ? "safetensors file with `video` [B, 3, F, H, W], F = 1 + 4k, H and W multiples of the stride s "
                        "(Wan2.1: 8, Wan2.2: 16)"
                      : "safetensors file with `latents` [B, z, T, h, w] (z: Wan2.1 16, Wan2.2 48)")
      ->required();
  cmd->add_option("--out", args->out,
                  encode ? "safetensors file to write `latents` [B, z, 1 + (F - 1) / 4, H / s, W / s] (f32) to"
                         : "safetensors file to write `video` [B, 3, 1 + 4 (T - 1), s h, s w] (f32) to")
      ->required();
  add_vae_tile_option(*cmd, args->chunking);
  add_backend_option(*cmd, args->backend, "auto: cuda when a usable GPU is present, else cpu");
  add_host_memory_option(*cmd, args->host_memory);
  cmd->callback([args, encode] { run_vae(*args, encode); });
}

}  // namespace

void add_vae_tile_option(CLI::App& cmd, VaeChunking& chunking) {
  cmd.add_option_function<std::vector<int64_t>>(
         "--vae-tile",
         [&chunking](const std::vector<int64_t>& v) {
           if (v.size() != 2) MS_FAIL("--vae-tile takes H,W (pixels), e.g. 256,256");
           chunking.tile_h = v[0];
           chunking.tile_w = v[1];
         },
         "H,W: run the VAE on spatial tiles of this many pixels (multiples of 8, at least 32), overlapping by a "
         "quarter and blended linearly: bounds memory for large frames (default: whole frames; docs/vae.md)")
      ->delimiter(',')
      ->expected(2);
}

void add_vae_command(CLI::App& app) {
  CLI::App* vae = app.add_subcommand("vae", "Wan2.1's video VAE: encode videos to latents, decode latents to videos");
  vae->require_subcommand(1);
  add_vae_verb(*vae, true);
  add_vae_verb(*vae, false);
}

}  // namespace ms::cli
