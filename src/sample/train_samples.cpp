#include "sample/train_samples.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "backend/cpu/vae_ops.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/log.h"
#include "core/text.h"
#include "eval/plot.h"
#include "model/param_table.h"
#include "model/vae_weights.h"
#include "sample/clip_output.h"

namespace fs = std::filesystem;

namespace ms {

void validate(const TrainSampleOptions& o) {
  if (o.every < 0) MS_FAIL("--sample-every must be >= 0 (0: samples only when the run ends), got ", o.every);
  if (o.steps <= 0) MS_FAIL("--sample-steps must be positive, got ", o.steps);
  if (o.format != "gif" && o.format != "mp4") MS_FAIL("--sample-format '", o.format, "' is unknown; use gif or mp4");
  std::error_code ec;
  if (!o.vae.empty() && !fs::exists(o.vae, ec))
    MS_FAIL("--vae ", quote_text(o.vae), " does not exist; pass Wan2.1_VAE.pth (or leave --vae out)");
  if (o.vae.empty() && !o.vae_config.empty()) MS_FAIL("--vae-config needs --vae");
}

void resolve_sample_prompts(TrainSampleOptions& o, const Dataset& data, bool resumed) {
  o.prompt_list.clear();
  if (o.prompts.empty()) {
    o.prompt_list = data.sample_prompts();
    if (o.every > 0 && o.prompt_list.empty())
      MS_FAIL("--sample-every ", o.every, " needs --sample-prompts FILE (one prompt a line): the data has no ",
              "built-in captions to sample");
    return;
  }
  try {
    o.prompt_list = read_prompts(o.prompts);
  } catch (const Error& e) {
    if (!resumed) throw;
    log_warn(e.what(), "; the resumed run draws no samples");
    return;
  }
  if (o.prompt_list.empty())
    MS_FAIL("--sample-prompts ", quote_text(o.prompts), " holds no prompts; write one prompt a line");
}

std::unique_ptr<VaeWeights> load_sample_vae(const TrainSampleOptions& o, const ModelConfig& c) {
  if (o.vae.empty() || !o.draws()) return nullptr;
  if (c.in_dim == 3) {
    log_warn("--vae ", quote_text(o.vae), " is not used: the model works on pixels, its samples are videos already");
    return nullptr;
  }
  auto vae = std::make_unique<VaeWeights>(VaeWeights::load(o.vae, o.vae_config));
  check_vae_decodes(vae->config(), c.in_dim, cat("--vae ", quote_text(o.vae)));
  return vae;
}

std::vector<std::string> read_prompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) MS_FAIL("cannot read prompts file '", path, "'; pass a text file with one prompt a line");
  std::vector<std::string> prompts;
  const char* space = " \t\r\n";
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find_first_not_of(space);
    if (a == std::string::npos) continue;
    prompts.push_back(line.substr(a, line.find_last_not_of(space) - a + 1));
  }
  return prompts;
}

TrainSamples write_train_samples(const TrainSampleOptions& o, const std::string& run_dir, const ModelConfig& c,
                                 const uint16_t* weights, int64_t step, const DataShape& shape, uint64_t seed,
                                 const VaeWeights* vae, const TextEncoder* t5) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string>& prompts = o.prompt_list;
  std::vector<float> params(size_t(ParamTable(c).total()));  // [P] f32 copy of the working weights
  convert_to_f32(DType::bf16, weights, params.data(), int64_t(params.size()));
  const fs::path dir = fs::path(run_dir) / "samples";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) MS_FAIL("cannot create '", dir.string(), "': ", ec.message());
  const SamplerConfig sampler{o.steps, SamplerConfig{}.shift};
  TrainSamples out;
  std::vector<RgbVideo> videos;  // the decoded clips, for the contact sheet
  // On the CPU, the model and the VAE: a training run's GPU memory belongs to its arena.
  const std::unique_ptr<VaeOps> vae_ops = vae ? cpu_vae_ops(*vae) : nullptr;
  const bool video = c.in_dim == 3 || vae;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const std::vector<float> ctx = prompt_context(c, prompts[k], t5);
    // The model's workspace goes before the VAE decodes (train/memory_fit.cpp counts the larger of the two).
    const std::vector<float> x = generate_clip(c, cpu_model_forward(c, params.data(), shape, c.text_len), ctx.data(),
                                               c.text_len, shape, sampler, seed + k);
    out.clips.push_back((dir / cat("step-", step, "-", k, ".", video ? o.format : "safetensors")).string());
    if (!video) {
      write_clip(out.clips.back(), x.data(), shape, 8);
      continue;
    }
    videos.push_back(clip_video(x.data(), shape, 8, vae_ops.get()));
    encode_video(out.clips.back(), videos.back());
  }
  if (video) {
    out.sheet = (dir / cat("step-", step, ".png")).string();
    const ImageSize size = plot_contact_sheet(out.sheet, videos, prompts);
    out.sheet_width = size.width;
    out.sheet_height = size.height;
  }
  log_info("step ", step, ": ", prompts.size(), " samples (", o.steps, " Euler steps each) in ",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
           " s: ", out.sheet.empty() ? out.clips.back() : out.sheet);
  return out;
}

}  // namespace ms
