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
#include "model/param_table.h"
#include "model/vae_weights.h"
#include "sample/clip_output.h"

namespace fs = std::filesystem;

namespace ms {

void validate(const TrainSampleOptions& o) {
  if (o.every < 0) MS_FAIL("--sample-every must be >= 0 (0: no samples), got ", o.every);
  if (o.every > 0 && o.prompts.empty())
    MS_FAIL("--sample-every ", o.every, " needs --sample-prompts FILE (one prompt a line)");
  if (o.every == 0 && !o.prompts.empty())
    MS_FAIL("--sample-prompts ", quote_text(o.prompts), " needs --sample-every N");
  if (o.steps <= 0) MS_FAIL("--sample-steps must be positive, got ", o.steps);
  if (o.format != "gif" && o.format != "mp4") MS_FAIL("--sample-format '", o.format, "' is unknown; use gif or mp4");
  std::error_code ec;
  if (!o.vae.empty() && !fs::exists(o.vae, ec))
    MS_FAIL("--vae ", quote_text(o.vae), " does not exist; pass Wan2.1_VAE.pth (or leave --vae out)");
  if (o.vae.empty() && !o.vae_config.empty()) MS_FAIL("--vae-config needs --vae");
  if (o.every > 0 && read_prompts(o.prompts).empty())
    MS_FAIL("--sample-prompts ", quote_text(o.prompts), " holds no prompts; write one prompt a line");
}

std::unique_ptr<VaeWeights> load_sample_vae(const TrainSampleOptions& o, const ModelConfig& c) {
  if (o.vae.empty() || o.every == 0) return nullptr;
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

void write_train_samples(const TrainSampleOptions& o, const std::string& run_dir, const ModelConfig& c,
                         const uint16_t* weights, int64_t step, const DataShape& shape, uint64_t seed,
                         const VaeWeights* vae, const TextEncoder* t5) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::string> prompts = read_prompts(o.prompts);
  std::vector<float> params(size_t(ParamTable(c).total()));  // [P] f32 copy of the working weights
  convert_to_f32(DType::bf16, weights, params.data(), int64_t(params.size()));
  const fs::path dir = fs::path(run_dir) / "samples";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) MS_FAIL("cannot create '", dir.string(), "': ", ec.message());
  const SamplerConfig sampler{o.steps, SamplerConfig{}.shift};
  std::string last;
  // On the CPU, the model and the VAE: a training run's GPU memory belongs to its arena.
  const std::unique_ptr<VaeOps> vae_ops = vae ? cpu_vae_ops(*vae) : nullptr;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const std::vector<float> ctx = prompt_context(c, prompts[k], t5);
    // The model's workspace goes before the VAE decodes (train/memory_fit.cpp counts the larger of the two).
    const std::vector<float> x = generate_clip(c, cpu_model_forward(c, params.data(), shape, c.text_len), ctx.data(),
                                               c.text_len, shape, sampler, seed + k);
    last = (dir / cat("step-", step, "-", k, ".", c.in_dim == 3 || vae ? o.format : "safetensors")).string();
    write_clip(last, x.data(), shape, 8, vae_ops.get());
  }
  log_info("step ", step, ": ", prompts.size(), " samples (", o.steps, " Euler steps each) in ",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), " s, last ", last);
}

}  // namespace ms
