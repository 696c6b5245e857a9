// `megaslide cache --data dataset.toml --vae FILE [--out DIR]`: encodes every clip of a dataset's video and image
// entries with Wan2.1's VAE into musubi-tuner's latent cache (DESIGN §9), the files its wan_cache_latents.py writes,
// into each entry's cache_directory (or --out). Clips already cached are skipped, so an interrupted run continues
// where it stopped; bad files are named and skipped (--on-bad-data fatal stops at the first).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/units.h"
#include "data/latent_cache.h"
#include "data/video_clips.h"
#include "vae/vae_model.h"

namespace ms::cli {
namespace {

namespace fs = std::filesystem;

struct CacheArgs {
  std::string data, vae, vae_config, out;
  VaeChunking chunking;
  BadDataPolicy on_bad_data = BadDataPolicy::skip;
};

std::string eta(double seconds) {
  char buf[32];
  const int64_t s = int64_t(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                (long long)(s % 60));
  return buf;
}

void run_cache(const CacheArgs& a) {
  check_vae_tile(a.chunking, "--vae-tile");
  const DatasetFile file = read_dataset_toml(a.data);
  std::vector<DatasetEntry> entries;
  for (const DatasetEntry& e : file.datasets)
    if (e.has_files()) {
      check_file_entry(file, e);
      if (e.cache_directory.empty() && a.out.empty())
        MS_FAIL("'", file.path, "': the entry of ", e.images() ? "images" : "videos", " ",
                quote_text(e.video_directory + e.video_jsonl_file + e.image_directory + e.image_jsonl_file),
                " has no cache_directory; add cache_directory = \"...\" to it, or pass --out DIR");
      entries.push_back(e);
    }
  if (entries.empty())
    MS_FAIL("'", file.path, "' has no video or image entries to encode (its entries are latent caches already)");
  const VaeWeights w = VaeWeights::load(a.vae, a.vae_config);
  const VaeConfig& c = w.config();
  DataOptions o;
  o.source = a.data;
  o.on_bad_data = a.on_bad_data;
  VideoClips clips(file, entries, o);
  const std::vector<VideoClips::ClipSource> sources = clips.sources();
  log_info(file.path, ": ", sources.size(), " clips to cache with the VAE from ", a.vae);
  int64_t written = 0, present = 0, bad = 0;
  double busy = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const VideoClips::ClipSource& s = sources[i];
    const fs::path dir = a.out.empty() ? fs::path(s.cache_directory) : fs::path(a.out);
    const fs::path path =
        dir / musubi_latent_name(s.path, s.image, s.start, s.shape.frames, s.source_width, s.source_height);
    std::error_code ec;
    if (fs::exists(path, ec)) {
      ++present;
      continue;
    }
    const auto t0 = std::chrono::steady_clock::now();
    try {
      check_vae_video_shape(c, s.shape.frames, s.shape.height, s.shape.width,
                            cat("clip ", quote_text(path.filename().string()), " of ", quote_text(s.path)));
      const DataSample clip = clips.clip(int64_t(i));
      const DataShape lat{c.z_dim, c.latent_frames(s.shape.frames), s.shape.height / c.space_stride(),
                          s.shape.width / c.space_stride()};
      std::vector<float> latents(size_t(lat.channels * lat.frames * lat.height * lat.width));
      vae_encode(w, clip.x0.data(), s.shape.frames, s.shape.height, s.shape.width, latents.data(), a.chunking);
      fs::create_directories(dir, ec);
      if (ec) MS_FAIL("cannot create the cache directory ", quote_text(dir.string()), ": ", ec.message());
      write_latent_cache(path.string(), latents.data(), lat, s.source_width, s.source_height,
                         s.image ? 0 : s.shape.frames);
      ++written;
    } catch (const Error& e) {
      if (a.on_bad_data == BadDataPolicy::fatal) throw;
      log_warn("skipped: ", e.what());
      ++bad;
      continue;
    }
    busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_clip = busy / double(written);
    log_info("[", i + 1, "/", sources.size(), "] ", path.filename().string(), " (", s.shape.frames, "x", s.shape.height,
             "x", s.shape.width, ") ", per_clip, " s/clip, ETA ", eta(per_clip * double(sources.size() - i - 1)));
  }
  log_info("cached ", written, " clips, ", present, " were cached already, ", bad, " skipped as bad; peak memory ",
           format_bytes(double(peak_resident_bytes())));
  log_info("text-encoder caches ({item}_wan_te.safetensors) are not written: megaslide has no umT5 encoder yet; ",
           "musubi-tuner's wan_cache_text_encoder_outputs.py writes them from the same dataset file");
  if (written + present == 0) MS_FAIL("no clip could be cached (", bad, " bad); see the warnings above");
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto a = std::make_shared<CacheArgs>();
  CLI::App* cmd =
      app.add_subcommand("cache", "Encode a dataset's videos and images with the VAE into musubi-tuner's latent cache");
  cmd->add_option("--data", a->data, "Dataset TOML (musubi-tuner's format; docs/data.md)")->required();
  cmd->add_option("--vae", a->vae, "Wan2.1_VAE.pth, a safetensors copy or diffusers' AutoencoderKLWan")->required();
  cmd->add_option("--vae-config", a->vae_config, "The VAE's config JSON (default: Wan2.1's)");
  cmd->add_option("--out", a->out, "Write every cache file here (default: each entry's cache_directory)");
  add_vae_tile_option(*cmd, a->chunking);
  cmd->add_option_function<std::string>(
         "--on-bad-data", [a](const std::string& v) { a->on_bad_data = parse_name<BadDataPolicy>(v, "--on-bad-data"); },
         "skip: name a bad file and go on; fatal: stop at it")
      ->default_str("skip");
  cmd->callback([a] { run_cache(*a); });
}

}  // namespace ms::cli
