// Rectified flow (docs/model.md): x_t = (1 - t) x0 + t eps, target v = eps - x0, model fed t * 1000.
#pragma once
#include <cstdint>
#include <string>

#include "core/enum_names.h"
#include "core/rng.h"

namespace ms {

enum class TimestepSampling { uniform, logit_normal, shift };
template <>
struct EnumNames<TimestepSampling> {
  static constexpr std::array<EnumName<TimestepSampling>, 3> values{{{TimestepSampling::uniform, "uniform"},
                                                                     {TimestepSampling::logit_normal, "logit_normal"},
                                                                     {TimestepSampling::shift, "shift"}}};
};

struct FlowConfig {
  TimestepSampling sampling = TimestepSampling::uniform;
  double shift = 3.0;                        // shift: t' = s t / (1 + (s - 1) t), t uniform (Wan / SD3)
  double logit_mean = 0.0, logit_std = 1.0;  // logit_normal: t = sigmoid(N(mean, std))
};

// Throws ms::Error for a non-positive shift / std.
void validate(const FlowConfig& c);

// A training timestep in (0, 1).
double sample_timestep(const FlowConfig& c, Rng& rng);

// x0, noise [n] -> xt [n] = (1 - t) x0 + t noise, target [n] = noise - x0.
void make_flow_pair(const float* x0, const float* noise, double t, float* xt, float* target, int64_t n);

}  // namespace ms
