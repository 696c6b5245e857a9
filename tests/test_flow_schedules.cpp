// The training timesteps' distributions against their closed-form CDFs (Kolmogorov-Smirnov, fixed seed), and the
// learning-rate schedules against hand-computed values (docs/training.md states every formula).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/rng.h"
#include "train/flow_matching.h"
#include "train/options.h"

namespace ms::test {
namespace {

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }
double logit(double t) { return std::log(t / (1.0 - t)); }
double unshift(double t, double s) { return t / (s - (s - 1.0) * t); }  // inverse of s t / (1 + (s - 1) t)

// sup |F_n - F| over n draws of c's timesteps for latents H x W.
double ks_distance(const FlowConfig& c, int64_t H, int64_t W, const std::function<double(double)>& cdf) {
  constexpr int n = 20000;
  Rng rng(12345);
  std::vector<double> x(n);
  for (double& t : x) t = sample_timestep(c, H, W, rng);
  std::sort(x.begin(), x.end());
  double d = 0;
  for (int i = 0; i < n; ++i) {
    const double f = cdf(x[size_t(i)]);
    d = std::max({d, std::fabs(f - double(i) / n), std::fabs(f - double(i + 1) / n)});
  }
  return d;
}

// The KS critical value at alpha = 0.001 for n = 20000: 1.95 / sqrt(n).
constexpr double kBound = 1.95 / 141.42135623730951;

TEST(TimestepSampling, EachDistributionIsItsClosedForm) {
  struct Case {
    const char* name;
    FlowConfig c;
    std::function<double(double)> cdf;
  };
  const double S = 3.0, s = 1.3, m = -0.4, sd = 0.8;
  // flux_shift at latents 60 x 104: (30 x 52) packed tokens, mu = 0.5 + 0.65 (1560 - 256) / 3840
  const double flux = std::exp(0.5 + 0.65 * (1560.0 - 256.0) / 3840.0);
  using T = TimestepSampling;
  const std::vector<Case> cases{
      {"uniform", {.sampling = T::uniform}, [](double t) { return t; }},
      {"sigmoid", {.sampling = T::sigmoid, .sigmoid_scale = s}, [=](double t) { return normal_cdf(logit(t) / s); }},
      {"logit_normal",
       {.sampling = T::logit_normal, .logit_mean = m, .logit_std = sd},
       [=](double t) { return normal_cdf((logit(t) - m) / sd); }},
      {"shift",
       {.sampling = T::shift, .shift = S, .sigmoid_scale = s},
       [=](double t) { return normal_cdf(logit(unshift(t, S)) / s); }},
      {"flux_shift", {.sampling = T::flux_shift}, [=](double t) { return normal_cdf(logit(unshift(t, flux))); }},
      {"uniform_shift", {.sampling = T::uniform_shift, .shift = S}, [=](double t) { return unshift(t, S); }},
      {"shift in [100, 700]",
       {.sampling = T::shift, .shift = S, .min_timestep = 100, .max_timestep = 700},
       [=](double t) { return normal_cdf(logit(unshift((t - 0.1) / 0.6, S))); }},
  };
  for (const Case& k : cases) EXPECT_LT(ks_distance(k.c, 60, 104, k.cdf), kBound) << k.name;
  // The test tells the formulas apart: musubi's shift is not the shifted uniform, and flux_shift depends on the size.
  EXPECT_GT(ks_distance(cases[3].c, 60, 104, cases[5].cdf), 4 * kBound);
  EXPECT_GT(ks_distance(cases[4].c, 120, 208, cases[4].cdf), 10 * kBound);
}

TEST(LrSchedule, ClosedFormsAtChosenSteps) {
  TrainOptions o;
  o.lr = 2.0, o.steps = 100, o.warmup = 10, o.lr_cycles = 3;
  auto at = [&](LrScheduler k, int64_t t) {
    o.lr_scheduler = k;
    return o.lr_at(t) / o.lr;
  };
  using L = LrScheduler;
  const double pi = 3.14159265358979323846;
  struct Case {
    L k;
    int64_t t;
    double want;
  };
  for (const Case& c : std::vector<Case>{
           {L::constant, 1, 1.0},
           {L::constant, 60, 1.0},
           {L::constant_with_warmup, 5, 0.5},
           {L::constant_with_warmup, 10, 1.0},
           {L::constant_with_warmup, 100, 1.0},
           {L::linear, 5, 0.5},
           {L::linear, 55, 0.5},  // (55 - 10) / 90
           {L::linear, 100, 0.0},
           {L::cosine, 3, 0.3},
           {L::cosine, 40, 0.5 * (1 + std::cos(pi / 3))},  // progress 1/3
           {L::cosine, 55, 0.5},
           {L::cosine_with_restarts, 25, 0.5},                             // 3 x 1/6 = half a cycle
           {L::cosine_with_restarts, 40, 1.0},                             // a restart
           {L::cosine_with_restarts, 46, 0.5 * (1 + std::cos(pi * 0.2))},  // 3 x 0.4 = 1.2
           {L::cosine_with_restarts, 100, 0.0},
       })
    EXPECT_NEAR(at(c.k, c.t), c.want, 1e-12) << name_of(c.k) << " at step " << c.t;
}

}  // namespace
}  // namespace ms::test
