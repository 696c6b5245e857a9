#include "sample/generate.h"

#include <algorithm>
#include <memory>

#include "backend/cpu/resident_model.h"
#include "core/check.h"
#include "data/text_embed.h"
#include "t5/text_encoder.h"

namespace ms {

void check_text_encoder_fits(const ModelConfig& c, const TextEncoder& t5) {
  if (t5.config().dim != c.text_dim)
    MS_FAIL("the text encoder ", t5.weights().source(), " gives rows of width ", t5.config().dim,
            " but the model's text_dim is ", c.text_dim, "; pass the text encoder the model was trained with");
  if (t5.config().text_len > c.text_len)
    MS_FAIL("the text encoder keeps up to ", t5.config().text_len, " tokens but the model's text_len is ", c.text_len,
            "; set the text encoder's text_len (--t5-config) to at most ", c.text_len);
}

std::vector<float> prompt_context(const ModelConfig& c, const std::string& prompt, const TextEncoder* t5) {
  std::vector<float> ctx(size_t(c.text_len * c.text_dim), 0.0f);  // [text_len, text_dim]
  if (!t5) {
    embed_caption(prompt, c.text_len, c.text_dim, ctx.data());
    return ctx;
  }
  check_text_encoder_fits(c, *t5);
  const EncodedPrompt e = t5->encode(prompt);  // [L, text_dim], the rest stays zero
  std::copy(e.context.begin(), e.context.end(), ctx.begin());
  return ctx;
}

int64_t sample_host_bytes(const ModelConfig& c, const DataShape& shape, bool guided, bool on_device) {
  const ModelDims d = ModelDims::make(c, 1, shape.frames, shape.height, shape.width, c.text_len);
  const int64_t clip = c.in_dim * d.F * d.H * d.W, P = ParamTable(c).total();
  const int64_t model = on_device ? 4 * (2 * clip + c.text_len * c.text_dim + 1)  // staging (bf16 in the f32's place)
                                  : ResidentModel<float>::workspace_bytes(c, d);
  return 4 * P + model + 4 * clip * (guided ? 3 : 2);
}

ModelForward cpu_model_forward(const ModelConfig& c, const float* params, const DataShape& shape, int64_t rows,
                               int64_t time_rows) {
  const ModelDims d = ModelDims::make(c, 1, shape.frames, shape.height, shape.width, rows, time_rows);
  auto model = std::make_shared<ResidentModel<float>>(c, d);
  return [model, params](const float* xt, const float* timesteps, const float* context, float* v) {
    model->forward(params, xt, timesteps, context, v);
  };
}

int64_t sample_time_rows(const ModelConfig& c, const DataShape& shape, bool image) {
  if (!image) return 1;
  c.require_image_frame("--image");
  if (shape.frames < 2) MS_FAIL("--image needs at least 2 latent frames (5 video frames): the first is the image");
  return shape.frames;
}

ModelForward expert_forward(std::function<ModelForward()> high, std::function<ModelForward()> low, double boundary) {
  struct State {
    std::function<ModelForward()> make[2];
    int current = -1;  // 0 high, 1 low
    ModelForward forward;
  };
  auto s = std::make_shared<State>();
  s->make[0] = std::move(high);
  s->make[1] = std::move(low);
  return [s, boundary](const float* xt, const float* timestep, const float* context, float* v) {
    const int want = *timestep >= 1000 * boundary ? 0 : 1;
    if (want != s->current) {
      s->forward = nullptr;  // the other expert's memory goes first
      s->forward = s->make[want]();
      s->current = want;
    }
    s->forward(xt, timestep, context, v);
  };
}

std::vector<float> generate_clip(const ModelConfig& c, const ModelForward& model, const float* context, int64_t rows,
                                 const DataShape& shape, const SamplerConfig& sampler, uint64_t seed,
                                 const StepFn& on_step, const Guidance& guidance, const float* image) {
  if (c.out_dim != c.in_dim)
    MS_FAIL("the model has in_dim ", c.in_dim, " but out_dim ", c.out_dim,
            "; sampling needs a velocity in the input space (out_dim = in_dim)");
  MS_CHECK(shape.channels == c.in_dim, "clip has ", shape.channels, " channels, the model's in_dim is ", c.in_dim);
  validate(sampler);
  const int64_t time_rows = sample_time_rows(c, shape, image != nullptr);
  const ModelDims d = ModelDims::make(c, 1, shape.frames, shape.height, shape.width, rows, time_rows);
  const int64_t n = c.in_dim * d.F * d.H * d.W, run = d.F * d.H * d.W, plane = d.H * d.W;
  std::vector<float> x(static_cast<size_t>(n));  // [1, in_dim, F, H, W] noise at t = 1, the sample at t = 0
  fill_noise(seed, x.data(), n);
  for (int64_t ch = 0; ch < c.in_dim && image; ++ch) std::copy_n(image + ch * plane, plane, x.data() + ch * run);
  std::vector<float> timesteps(static_cast<size_t>(time_rows));  // [time_rows]: the image's frame at 0
  const bool guided =
      guidance.negative && (guidance.scale != 1.0 || (guidance.boundary > 0 && guidance.scale_low != 1.0));
  std::vector<float> unconditional(guided ? size_t(n) : 0);  // [1, in_dim, F, H, W]
  const VelocityFn velocity = [&](const float* xt, double t, float* v) {
    const float timestep = float(t * 1000.0);  // the model's timestep scale (train/flow_matching.h)
    std::fill(timesteps.begin(), timesteps.end(), timestep);
    if (image) timesteps[0] = 0.0f;
    // The image's frame stays as it is: no velocity there (Wan re-imposes it after each step).
    const auto keep_image = [&] {
      for (int64_t ch = 0; ch < c.in_dim && image; ++ch) std::fill_n(v + ch * run, plane, 0.0f);
    };
    model(xt, timesteps.data(), context, v);
    const float s = float(guidance.scale_at(timestep));
    if (!guided || s == 1.0f) return keep_image();
    model(xt, timesteps.data(), guidance.negative, unconditional.data());
    for (int64_t i = 0; i < n; ++i) v[i] = unconditional[size_t(i)] + s * (v[i] - unconditional[size_t(i)]);
    keep_image();
  };
  euler_sample(sampler, velocity, x.data(), n, on_step);
  return x;
}

}  // namespace ms
