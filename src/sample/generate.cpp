#include "sample/generate.h"

#include "backend/cpu/resident_model.h"
#include "core/check.h"
#include "data/text_embed.h"

namespace ms {

std::vector<float> prompt_context(const ModelConfig& c, const std::string& prompt) {
  std::vector<float> ctx(size_t(c.text_len * c.text_dim));  // [text_len, text_dim]
  embed_caption(prompt, c.text_len, c.text_dim, ctx.data());
  return ctx;
}

std::vector<float> generate_clip(const ModelConfig& c, const float* params, const float* context, int64_t rows,
                                 const DataShape& shape, const SamplerConfig& sampler, uint64_t seed,
                                 const StepFn& on_step) {
  if (c.out_dim != c.in_dim)
    MS_FAIL("the model has in_dim ", c.in_dim, " but out_dim ", c.out_dim,
            "; sampling needs a velocity in the input space (out_dim = in_dim)");
  MS_CHECK(shape.channels == c.in_dim, "clip has ", shape.channels, " channels, the model's in_dim is ", c.in_dim);
  validate(sampler);
  const ModelDims d = ModelDims::make(c, 1, shape.frames, shape.height, shape.width, rows);
  ResidentModel<float> model(c, d);
  const int64_t n = c.in_dim * d.F * d.H * d.W;
  std::vector<float> x(static_cast<size_t>(n));  // [1, in_dim, F, H, W] noise at t = 1, the sample at t = 0
  fill_noise(seed, x.data(), n);
  const VelocityFn velocity = [&](const float* xt, double t, float* v) {
    const float timestep = float(t * 1000.0);  // [1] the model's timestep scale (train/flow_matching.h)
    model.forward(params, xt, &timestep, context, v);
  };
  euler_sample(sampler, velocity, x.data(), n, on_step);
  return x;
}

}  // namespace ms
