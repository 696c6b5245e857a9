// Text-to-video generation (and TI2V's image to video): noise from a seed, the Euler sampler of sample/sampler.h with
// the model's forward as the velocity, one clip at a time (batch 1).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "model/config.h"
#include "sample/sampler.h"

namespace ms {

class TextEncoder;

// The context of `prompt` for model c: [text_len, text_dim]. With a text encoder, its output rows zero-padded to
// text_len as Wan pads them; without one, the built-in caption hash (data/text_embed.h, a stand-in for toy models).
std::vector<float> prompt_context(const ModelConfig& c, const std::string& prompt, const TextEncoder* t5 = nullptr);

// Throws ms::Error when t5's output does not fit model c: its width must be text_dim and its text_len at most c's.
void check_text_encoder_fits(const ModelConfig& c, const TextEncoder& t5);

// Classifier-free guidance (Wan's): v = v(negative) + scale (v(context) - v(negative)); scale 1 (or no negative
// context) runs the conditional model alone. Wan2.2 A14B guides its two experts with their own scales: below the
// boundary (timestep < 1000 boundary) the low-noise expert's scale_low.
struct Guidance {
  const float* negative = nullptr;  // [rows, text_dim] like the context
  double scale = 1.0;
  double boundary = 0, scale_low = 1.0;  // boundary 0: one scale throughout
  double scale_at(double timestep) const { return boundary > 0 && timestep < 1000 * boundary ? scale_low : scale; }
};

// The model's velocity v [in_dim, F, H, W] at x_t [in_dim, F, H, W], timesteps [time_rows] (t x 1000, the model's
// scale; one per latent frame for image to video, else one) and context [rows, text_dim] (the rows generate_clip was
// given): on the CPU (cpu_model_forward) or on a backend's device (runtime/streamed_forward.h), each made for its
// time_rows.
using ModelForward = std::function<void(const float* xt, const float* timesteps, const float* context, float* v)>;

// Wan2.2 A14B's sampling (one timestep per clip): the high-noise expert's forward at timesteps >= 1000 boundary, the
// low-noise one's below.
// Each is made by its factory when first needed, the other released first, so that one expert's memory is held at a
// time (the sampler's timesteps only fall: it switches once).
ModelForward expert_forward(std::function<ModelForward()> high, std::function<ModelForward()> low, double boundary);

// The resident model on the CPU over f32 params [ParamTable(c).total()] (which must outlive it), for one clip of
// `shape` with `rows` context rows and `time_rows` timesteps.
ModelForward cpu_model_forward(const ModelConfig& c, const float* params, const DataShape& shape, int64_t rows,
                               int64_t time_rows = 1);

// The timesteps per clip generate_clip gives a model of config c for clips of `shape`: one, or with an image one per
// latent frame (throws ms::Error unless c is a TI2V model with one latent frame per token frame).
int64_t sample_time_rows(const ModelConfig& c, const DataShape& shape, bool image);

// Host bytes a sample of `shape` needs: the model's f32 weights, the resident model's workspace (on_device: the
// device's staging buffers instead, the weights rounded to bf16 where they lie), and the clip's buffers (noise,
// velocity, and the unconditional velocity when guided). What `sample` checks before it loads.
int64_t sample_host_bytes(const ModelConfig& c, const DataShape& shape, bool guided, bool on_device = false);

// model: the forward of model c for clips of `shape`; context [rows, text_dim] with 1 <= rows <= text_len; guidance
// as above; shape is the model's input [in_dim, F, H, W] (pixels for pixel-space models, latents otherwise).
// Returns the sample x0 [in_dim, F, H, W] (model space: pixels in about [-1, 1], or latents).
// Deterministic: the same inputs and seed give the same bytes. Throws ms::Error for a model whose
// out_dim differs from in_dim (it predicts no velocity in its own input space) or bad extents.
// image: TI2V's image to video, as Wan2.2's textimage2video.py samples it: the image's latent [in_dim, 1, H, W] is the
// clip's first latent frame from the start and after every step (its velocity is taken as 0), its tokens at
// timestep 0 and the other frames' at the step's (model made for sample_time_rows(c, shape, true)); null: text to
// video.
std::vector<float> generate_clip(const ModelConfig& c, const ModelForward& model, const float* context, int64_t rows,
                                 const DataShape& shape, const SamplerConfig& sampler, uint64_t seed,
                                 const StepFn& on_step = {}, const Guidance& guidance = {},
                                 const float* image = nullptr);

}  // namespace ms
