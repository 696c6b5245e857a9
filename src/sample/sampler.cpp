#include "sample/sampler.h"

#include "core/check.h"
#include "core/rng.h"

namespace ms {

void validate(const SamplerConfig& c) {
  if (c.steps <= 0) MS_FAIL("--steps must be positive (Euler steps from noise to data), got ", c.steps);
  if (!(c.shift > 0)) MS_FAIL("--shift must be positive (1: linear grid; Wan uses 3 to 12), got ", c.shift);
}

std::vector<double> shifted_times(const SamplerConfig& c) {
  validate(c);
  std::vector<double> t(size_t(c.steps + 1));
  for (int64_t i = 0; i <= c.steps; ++i) {
    const double s = 1.0 - double(i) / double(c.steps);
    t[size_t(i)] = c.shift * s / (1.0 + (c.shift - 1.0) * s);
  }
  t.back() = 0.0;  // exactly data at the end, whatever the rounding above
  return t;
}

void euler_sample(const SamplerConfig& c, const VelocityFn& velocity, float* x, int64_t n, const StepFn& on_step) {
  const std::vector<double> t = shifted_times(c);
  std::vector<float> v(static_cast<size_t>(n));  // [n] velocity at the current step
  for (int64_t i = 0; i < c.steps; ++i) {
    const double t0 = t[size_t(i)], t1 = t[size_t(i + 1)];
    velocity(x, t0, v.data());
    const float dt = float(t1 - t0);  // negative: integrating from noise towards data
    for (int64_t j = 0; j < n; ++j) x[j] += dt * v[size_t(j)];
    if (on_step) on_step(i + 1, c.steps, t0, t1);
  }
}

void fill_noise(uint64_t seed, float* x, int64_t n) {
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) x[i] = float(rng.normal());
}

}  // namespace ms
