// Samples during training (`megaslide train --sample-every N --sample-prompts FILE`): every N steps,
// one clip per prompt from the current working weights, written to OUT/samples/step-N-K.<format>.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/vae_weights.h"
#include "sample/generate.h"
#include "t5/text_encoder.h"

namespace ms {

struct TrainSampleOptions {
  int64_t every = 0;            // sample every N optimizer steps (0: never)
  std::string prompts;          // text file, one prompt per line (blank lines skipped)
  int64_t steps = 20;           // Euler steps per clip
  std::string format = "gif";   // gif | mp4 (latent models without a VAE write .safetensors)
  std::string vae, vae_config;  // latent models: the VAE that decodes their samples into videos ("": none)
};

// Throws ms::Error naming the bad value: a prompts file without --sample-every or the reverse, a
// missing or empty prompts file, a non-positive step count, an unknown format, a VAE file that does not exist.
void validate(const TrainSampleOptions& o);

// The VAE that decodes the samples of a model with config c, loaded once when the run starts (null when there are
// no samples, no --vae, or a pixel model, which is warned about). Throws ms::Error when it cannot be loaded or its
// z_dim is not the model's in_dim.
std::unique_ptr<VaeWeights> load_sample_vae(const TrainSampleOptions& o, const ModelConfig& c);

// The non-blank lines of `path`, trimmed. Throws ms::Error when it cannot be read.
std::vector<std::string> read_prompts(const std::string& path);

// True when step t (1-based) is a sampling step.
inline bool sample_due(const TrainSampleOptions& o, int64_t t) { return o.every > 0 && t % o.every == 0; }

// Writes run_dir/samples/step-<step>-<K>.<format> for every prompt K from the bf16 working weights
// [ParamTable(c).total()], decoded by vae when given (load_sample_vae), prompts embedded by t5 when given (else the
// built-in hash), unguided; shape is the model input [in_dim, F, H, W].
// Clip K's noise comes from seed + K, the same at every step, so samples of one prompt are comparable across steps.
void write_train_samples(const TrainSampleOptions& o, const std::string& run_dir, const ModelConfig& c,
                         const uint16_t* weights, int64_t step, const DataShape& shape, uint64_t seed,
                         const VaeWeights* vae, const TextEncoder* t5);

}  // namespace ms
