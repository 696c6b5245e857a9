// Text-to-video generation with a resident model: noise from a seed, the Euler sampler of
// sample/sampler.h with the model as the velocity, one clip at a time (batch 1).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/config.h"
#include "sample/sampler.h"

namespace ms {

// The built-in caption embedding of `prompt` (data/text_embed.h): [text_len, text_dim].
std::vector<float> prompt_context(const ModelConfig& c, const std::string& prompt);

// params [ParamTable(c).total()] f32; context [rows, text_dim] with 1 <= rows <= text_len; shape is
// the model's input [in_dim, F, H, W] (pixels for pixel-space models, latents otherwise).
// Returns the sample x0 [in_dim, F, H, W] (model space: pixels in about [-1, 1], or latents).
// Deterministic: the same inputs and seed give the same bytes. Throws ms::Error for a model whose
// out_dim differs from in_dim (it predicts no velocity in its own input space) or bad extents.
std::vector<float> generate_clip(const ModelConfig& c, const float* params, const float* context, int64_t rows,
                                 const DataShape& shape, const SamplerConfig& sampler, uint64_t seed,
                                 const StepFn& on_step = {});

}  // namespace ms
