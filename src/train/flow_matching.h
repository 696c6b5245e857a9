// Rectified flow (docs/model.md): x_t = (1 - t) x0 + t eps, target v = eps - x0, model fed t * 1000; and the
// training timesteps' distributions, as musubi-tuner draws them (docs/training.md states each formula).
#pragma once
#include <cstdint>
#include <string>

#include "core/enum_names.h"
#include "core/rng.h"

namespace ms {

// uniform_shift is megaslide's shift before it followed musubi-tuner (the shift applied to a uniform draw): runs
// saved with it resume with it.
enum class TimestepSampling { uniform, sigmoid, logit_normal, shift, flux_shift, uniform_shift };
template <>
struct EnumNames<TimestepSampling> {
  static constexpr std::array<EnumName<TimestepSampling>, 6> values{
      {{TimestepSampling::uniform, "uniform"},
       {TimestepSampling::sigmoid, "sigmoid"},
       {TimestepSampling::logit_normal, "logit_normal"},
       {TimestepSampling::shift, "shift"},
       {TimestepSampling::flux_shift, "flux_shift"},
       {TimestepSampling::uniform_shift, "uniform_shift"}}};
};

struct FlowConfig {
  TimestepSampling sampling = TimestepSampling::uniform;
  double shift = 3.0;                            // shift, uniform_shift: musubi's --discrete_flow_shift
  double sigmoid_scale = 1.0;                    // sigmoid, shift, flux_shift: t = sigmoid(scale * N(0, 1))
  double logit_mean = 0.0, logit_std = 1.0;      // logit_normal: t = sigmoid(N(mean, std))
  double min_timestep = 0, max_timestep = 1000;  // t is mapped onto [min, max] / 1000
};

// Throws ms::Error naming the flag of a bad value.
void validate(const FlowConfig& c);

// A training timestep in [min_timestep, max_timestep] / 1000 for a batch of latents H x W (flux_shift's shift
// depends on (H/2) (W/2), integer division as musubi-tuner packs 2 x 2).
double sample_timestep(const FlowConfig& c, int64_t latent_height, int64_t latent_width, Rng& rng);
// The random numbers (Rng::next_u64 calls) one sample_timestep draws: the same for every call of a config.
int64_t timestep_draws(const FlowConfig& c);

// x0, noise [n] -> xt [n] = (1 - t) x0 + t noise, target [n] = noise - x0.
void make_flow_pair(const float* x0, const float* noise, double t, float* xt, float* target, int64_t n);

}  // namespace ms
