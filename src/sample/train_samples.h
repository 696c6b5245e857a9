// Samples during training (`megaslide train [--sample-every N] [--sample-prompts FILE]`): every N steps and when the
// run ends, one clip per prompt from the current working weights, written to OUT/samples/step-N-K.<format>, and
// a contact sheet of them all, OUT/samples/step-N.png. Without --sample-prompts the prompts are the data's own
// (the built-in shapes' captions; other data has none, and then nothing is sampled).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/config.h"
#include "model/vae_weights.h"
#include "sample/generate.h"
#include "t5/text_encoder.h"

namespace ms {

struct TrainSampleOptions {
  int64_t every = 0;            // also sample every N optimizer steps (0: only when the run ends)
  bool no_final = false;        // --no-final-samples: the run ends without sampling
  std::string prompts;          // text file, one prompt per line (blank lines skipped); "": the data's own
  int64_t steps = 20;           // Euler steps per clip
  std::string format = "gif";   // gif | mp4 (latent models without a VAE write .safetensors)
  std::string vae, vae_config;  // latent models: the VAE that decodes their samples into videos ("": none)
  // The prompts themselves, read once when the run starts (resolve_sample_prompts); never saved with the options.
  std::vector<std::string> prompt_list;

  // Whether the run draws samples at all, and whether step t (1-based) of a run of `steps` is a sampling step.
  bool draws() const { return !prompt_list.empty() && (every > 0 || !no_final); }
  bool due(int64_t t, int64_t steps) const {
    return !prompt_list.empty() && ((every > 0 && t % every == 0) || (t == steps && !no_final));
  }
};

// Throws ms::Error naming the bad value: a negative --sample-every, a non-positive step count, an unknown format,
// a VAE file that does not exist. Reads no file: the prompts are read once, by resolve_sample_prompts.
void validate(const TrainSampleOptions& o);

// Fills o.prompt_list: the lines of --sample-prompts (read here, once: a pipe is read whole), else the data's own
// captions for samples. Throws ms::Error when the file cannot be read or holds no prompt, or when --sample-every is
// given and there are no prompts; a resumed run whose prompts file is gone warns and samples nothing.
void resolve_sample_prompts(TrainSampleOptions& o, const Dataset& data, bool resumed);

// The VAE that decodes the samples of a model with config c, loaded once when the run starts (null when there are
// no samples, no --vae, or a pixel model, which is warned about). Throws ms::Error when it cannot be loaded or its
// z_dim is not the model's in_dim.
std::unique_ptr<VaeWeights> load_sample_vae(const TrainSampleOptions& o, const ModelConfig& c);

// The non-blank lines of `path`, trimmed. Throws ms::Error when it cannot be read.
std::vector<std::string> read_prompts(const std::string& path);

// What one sampling step wrote: the clips' files and the contact sheet (sheet "": latents without a VAE, no sheet).
struct TrainSamples {
  std::vector<std::string> clips;
  std::string sheet;
  int64_t sheet_width = 0, sheet_height = 0;
};

// Writes run_dir/samples/step-<step>-<K>.<format> for every prompt K of o.prompt_list, and their contact sheet
// run_dir/samples/step-<step>.png, from the bf16 working weights [ParamTable(c).total()], decoded by vae when given
// (load_sample_vae), prompts embedded by t5 when given (else the built-in hash), unguided; shape is the model input
// [in_dim, F, H, W]. Clip K's noise comes from seed + K, the same at every step, so samples of one prompt are
// comparable across steps.
TrainSamples write_train_samples(const TrainSampleOptions& o, const std::string& run_dir, const ModelConfig& c,
                                 const uint16_t* weights, int64_t step, const DataShape& shape, uint64_t seed,
                                 const VaeWeights* vae, const TextEncoder* t5);

}  // namespace ms
