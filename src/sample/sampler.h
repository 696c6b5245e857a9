// Flow-matching Euler sampler in the rectified-flow convention of train/flow_matching.h:
// x_t = (1 - t) x0 + t eps, so t = 1 is pure noise, t = 0 is data and the velocity is
// v = dx/dt = eps - x0. The sampler integrates dx/dt = v(x, t) from t = 1 down to t = 0 with Euler
// steps x <- x + (t_next - t) v(x, t) on Wan's shifted grid. The velocity is injected, so the
// integration is tested against closed forms without a model (tests/test_sampler.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace ms {

struct SamplerConfig {
  int64_t steps = 30;  // Euler steps (model evaluations)
  double shift = 5.0;  // Wan's timestep shift (1: the plain linear grid)
};

// Throws ms::Error naming a non-positive step count or shift.
void validate(const SamplerConfig& c);

// steps + 1 times from 1 down to 0: s_i = 1 - i / steps, t_i = shift s_i / (1 + (shift - 1) s_i).
std::vector<double> shifted_times(const SamplerConfig& c);

// v [n] = velocity at x [n] and time t in [0, 1] (the model takes t * 1000).
using VelocityFn = std::function<void(const float* x, double t, float* v)>;
// Called after Euler step `step` (1-based) of `steps`, which moved x from time t to t_next.
using StepFn = std::function<void(int64_t step, int64_t steps, double t, double t_next)>;

// Integrates x [n] in place from t = 1 (x holds the noise) to t = 0 (x holds the sample).
void euler_sample(const SamplerConfig& c, const VelocityFn& velocity, float* x, int64_t n, const StepFn& on_step = {});

// x [n] = standard normal noise, a pure function of seed (the same ms::Rng stream as training).
void fill_noise(uint64_t seed, float* x, int64_t n);

}  // namespace ms
