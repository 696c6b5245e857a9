#include "train/flow_matching.h"

#include <cmath>

#include "core/check.h"

namespace ms {

void validate(const FlowConfig& c) {
  if (!(c.shift > 0)) MS_FAIL("--shift must be positive, got ", c.shift);
  if (!(c.logit_std > 0)) MS_FAIL("--logit-std must be positive, got ", c.logit_std);
}

double sample_timestep(const FlowConfig& c, Rng& rng) {
  if (c.sampling == TimestepSampling::logit_normal) return 1.0 / (1.0 + std::exp(-(c.logit_mean + c.logit_std * rng.normal())));
  const double u = rng.uniform();
  if (c.sampling == TimestepSampling::shift) return c.shift * u / (1.0 + (c.shift - 1.0) * u);
  return u;
}

void make_flow_pair(const float* x0, const float* noise, double t, float* xt, float* target, int64_t n) {
  const float tf = float(t);
  for (int64_t i = 0; i < n; ++i) {
    xt[i] = (1.0f - tf) * x0[i] + tf * noise[i];
    target[i] = noise[i] - x0[i];
  }
}

}  // namespace ms
