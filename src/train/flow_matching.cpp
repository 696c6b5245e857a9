#include "train/flow_matching.h"

#include <cmath>

#include "core/check.h"

namespace ms {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// t' = s t / (1 + (s - 1) t): the shift of SD3 and Wan.
double shifted(double t, double s) { return s * t / (1.0 + (s - 1.0) * t); }

}  // namespace

void validate(const FlowConfig& c) {
  if (!(c.shift > 0)) MS_FAIL("--discrete-flow-shift must be positive, got ", c.shift);
  if (!(c.sigmoid_scale > 0)) MS_FAIL("--sigmoid-scale must be positive, got ", c.sigmoid_scale);
  if (!(c.logit_std > 0)) MS_FAIL("--logit-std must be positive, got ", c.logit_std);
  if (!(c.min_timestep >= 0 && c.min_timestep < c.max_timestep && c.max_timestep <= 1000))
    MS_FAIL("--min-timestep ", c.min_timestep, " and --max-timestep ", c.max_timestep,
            " must satisfy 0 <= min < max <= 1000");
}

double sample_timestep(const FlowConfig& c, int64_t latent_height, int64_t latent_width, Rng& rng) {
  double t = 0;
  switch (c.sampling) {
    case TimestepSampling::uniform:
      t = rng.uniform();
      break;
    case TimestepSampling::sigmoid:
      t = sigmoid(c.sigmoid_scale * rng.normal());
      break;
    case TimestepSampling::logit_normal:
      t = sigmoid(c.logit_mean + c.logit_std * rng.normal());
      break;
    case TimestepSampling::shift:
      t = shifted(sigmoid(c.sigmoid_scale * rng.normal()), c.shift);
      break;
    case TimestepSampling::flux_shift: {  // mu linear in the packed token count: 0.5 at 256, 1.15 at 4096
      const double tokens = double((latent_height / 2) * (latent_width / 2));
      const double mu = 0.5 + (1.15 - 0.5) / (4096.0 - 256.0) * (tokens - 256.0);
      t = shifted(sigmoid(c.sigmoid_scale * rng.normal()), std::exp(mu));
      break;
    }
    case TimestepSampling::uniform_shift:
      t = shifted(rng.uniform(), c.shift);
      break;
  }
  const double lo = c.min_timestep / 1000.0, hi = c.max_timestep / 1000.0;
  return t * (hi - lo) + lo;
}

int64_t timestep_draws(const FlowConfig& c) {
  const bool uniform = c.sampling == TimestepSampling::uniform || c.sampling == TimestepSampling::uniform_shift;
  return uniform ? 1 : 2;  // Rng::normal takes two
}

void make_flow_pair(const float* x0, const float* noise, double t, float* xt, float* target, int64_t n) {
  const float tf = float(t);
  for (int64_t i = 0; i < n; ++i) {
    xt[i] = (1.0f - tf) * x0[i] + tf * noise[i];
    target[i] = noise[i] - x0[i];
  }
}

}  // namespace ms
