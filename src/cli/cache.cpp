// `megaslide cache --data dataset.toml [--vae FILE] [--t5 FILE --tokenizer FILE] [--out DIR]`: encodes every clip of a
// dataset's video and image entries with Wan2.1's VAE, and every file's caption with umT5, into musubi-tuner's cache
// (docs/data.md): the files its wan_cache_latents.py and wan_cache_text_encoder_outputs.py write, into each entry's
// cache_directory (or --out). Files already cached are skipped, so an interrupted run continues where it stopped; bad
// files are named and skipped (--on-bad-data fatal stops at the first).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "cli/commands.h"
#include "core/check.h"
#include "core/log.h"
#include "core/memory_usage.h"
#include "core/units.h"
#include "data/latent_cache.h"
#include "data/video_clips.h"
#include "registry/frozen_models.h"
#include "t5/text_encoder.h"
#include "vae/vae_model.h"

namespace ms::cli {
namespace {

namespace fs = std::filesystem;

struct CacheArgs {
  std::string data, vae, vae_config, out;
  T5Paths t5;
  VaeChunking chunking;
  BadDataPolicy on_bad_data = BadDataPolicy::skip;
  int64_t host_memory = 0;  // --host-memory; 0: detected
  BackendChoice backend = BackendChoice::automatic;
};

std::string eta(double seconds) {
  char buf[32];
  const int64_t s = int64_t(seconds + 0.5);
  std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600), (long long)(s / 60 % 60),
                (long long)(s % 60));
  return buf;
}

struct Counts {
  int64_t written = 0, present = 0, bad = 0;
};

// Writes one cache file unless it exists: make(path) does the work; a bad clip is skipped (named) or, with
// --on-bad-data fatal, stops the run. A failure of the GPU itself (DeviceError) stops it either way: every later clip
// would fail alike. Returns whether it wrote the file.
bool cache_file(const fs::path& path, BadDataPolicy policy, Counts& n,
                const std::function<void(const std::string&)>& make) {
  std::error_code ec;
  if (fs::exists(path, ec)) {
    ++n.present;
    return false;
  }
  try {
    fs::create_directories(path.parent_path(), ec);
    if (ec) MS_FAIL("cannot create the cache directory ", quote_text(path.parent_path().string()), ": ", ec.message());
    make(path.string());
    ++n.written;
    return true;
  } catch (const DeviceError&) {
    throw;
  } catch (const Error& e) {
    if (policy == BadDataPolicy::fatal) throw;
    log_warn("skipped: ", e.what());
    ++n.bad;
    return false;
  }
}

void run_cache(const CacheArgs& a) {
  if (a.vae.empty() && a.t5.t5.empty()) MS_FAIL("cache needs --vae (latent files), --t5 (text files) or both");
  check_vae_tile(a.chunking, "--vae-tile");
  const BackendKind backend = resolve_gpu_backend(a.backend);
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
  std::unique_ptr<VaeWeights> vae;
  std::unique_ptr<VaeOps> vae_ops;
  if (!a.vae.empty()) {
    vae = std::make_unique<VaeWeights>(VaeWeights::load(a.vae, a.vae_config));
    vae_ops = make_vae_ops(backend, *vae);
  }
  std::unique_ptr<TextEncoder> t5;
  if (!a.t5.t5.empty()) {
    t5 = std::make_unique<TextEncoder>(a.t5.t5, a.t5.tokenizer, a.t5.config);
    t5->set_forward(make_t5_forward(backend, t5->weights(), a.backend == BackendChoice::automatic));
  }
  DataOptions o;
  o.source = a.data;
  o.on_bad_data = a.on_bad_data;
  VideoClips clips(file, entries, o);
  const std::vector<VideoClips::ClipSource> sources = clips.sources();
  log_info(file.path, ": ", sources.size(), " clips to cache", vae ? cat(" with the VAE from ", a.vae) : "",
           vae && t5 ? " and" : "", t5 ? cat(" with the text encoder from ", a.t5.t5) : "", " (backend ", backend, ")");
  Counts latents, texts;
  double busy = 0;
  int64_t done = 0;
  for (size_t i = 0; i < sources.size(); ++i) {
    const VideoClips::ClipSource& s = sources[i];
    const fs::path dir = a.out.empty() ? fs::path(s.cache_directory) : fs::path(a.out);
    const auto t0 = std::chrono::steady_clock::now();
    bool wrote = false;
    if (vae) {
      const VaeConfig& c = vae->config();
      const fs::path path =
          dir / musubi_latent_name(s.path, s.image, s.start, s.shape.frames, s.source_width, s.source_height);
      wrote |= cache_file(path, a.on_bad_data, latents, [&](const std::string& out) {
        const std::string clip_name = cat("clip ", quote_text(path.filename().string()), " of ", quote_text(s.path));
        check_vae_video_shape(c, s.shape.frames, s.shape.height, s.shape.width, clip_name);
        check_vae_fits(c, true, s.shape.frames, s.shape.height, s.shape.width, a.chunking, host_limit(a.host_memory),
                       clip_name);
        const DataSample clip = clips.clip(int64_t(i));
        const DataShape lat{c.z_dim, c.latent_frames(s.shape.frames), s.shape.height / c.space_stride(),
                            s.shape.width / c.space_stride()};
        std::vector<float> z(size_t(lat.channels * lat.frames * lat.height * lat.width));
        vae_encode(*vae_ops, clip.x0.data(), s.shape.frames, s.shape.height, s.shape.width, z.data(), a.chunking);
        write_latent_cache(out, z.data(), lat, s.source_width, s.source_height, s.image ? 0 : s.shape.frames);
      });
    }
    if (t5)  // one text file per video or image: its first clip writes it, the others find it
      wrote |= cache_file(dir / musubi_text_name(s.path), a.on_bad_data, texts, [&](const std::string& out) {
        const EncodedPrompt e = t5->encode(s.caption);
        write_text_cache(out, e.context.data(), int64_t(e.ids.size()), t5->config().dim, s.caption);
      });
    if (!wrote) continue;
    busy += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double per_clip = busy / double(++done);
    log_info("[", i + 1, "/", sources.size(), "] ", fs::path(s.path).filename().string(), " (", s.shape.frames, "x",
             s.shape.height, "x", s.shape.width, ") ", format_fixed(per_clip, 2), " s/clip, ETA ",
             eta(per_clip * double(sources.size() - i - 1)));
  }
  if (vae)
    log_info("latents: cached ", latents.written, " clips, ", latents.present, " were cached already, ", latents.bad,
             " skipped as bad");
  if (t5)
    log_info("text: cached ", texts.written, " captions, ", texts.present, " were cached already, ", texts.bad,
             " skipped as bad");
  else
    log_info(
        "text-encoder files ({item}_wan_te.safetensors) are not written: pass --t5 and --tokenizer (umT5) to "
        "write them too");
  log_info("peak memory ", format_bytes(double(peak_resident_bytes())));
  if (latents.written + latents.present + texts.written + texts.present == 0)
    MS_FAIL("nothing could be cached (", latents.bad + texts.bad, " bad); see the warnings above");
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto a = std::make_shared<CacheArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cache", "Encode a dataset's videos and images (VAE) and captions (umT5) into musubi-tuner's cache");
  cmd->add_option("--data", a->data, "Dataset TOML (musubi-tuner's format; docs/data.md)")->required();
  cmd->add_option("--vae", a->vae,
                  "Wan2.1_VAE.pth, a safetensors copy or diffusers' AutoencoderKLWan: writes the latent files");
  cmd->add_option("--vae-config", a->vae_config, "The VAE's config JSON (default: Wan2.1's)");
  add_t5_options(*cmd, a->t5, false, ": writes the text files {item}_wan_te.safetensors from the captions");
  cmd->add_option("--out", a->out, "Write every cache file here (default: each entry's cache_directory)");
  add_vae_tile_option(*cmd, a->chunking);
  add_host_memory_option(*cmd, a->host_memory);
  add_backend_option(*cmd, a->backend,
                     "of the VAE and the text encoder; auto: cuda when a usable GPU is present, else cpu");
  cmd->add_option_function<std::string>(
         "--on-bad-data", [a](const std::string& v) { a->on_bad_data = parse_name<BadDataPolicy>(v, "--on-bad-data"); },
         "skip: name a bad file and go on; fatal: stop at it")
      ->default_str("skip");
  cmd->callback([a] { run_cache(*a); });
}

}  // namespace ms::cli
