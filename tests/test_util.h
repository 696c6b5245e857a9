// Shared test helpers: random inputs, float64 central differences, error norms.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/rng.h"
#include "io/safetensors.h"

namespace ms::test {

// The tensor `name` of f as f32 (a failed expectation, and nothing, when f lacks it).
inline std::vector<float> tensor_values(const SafetensorsFile& f, const std::string& name) {
  const TensorEntry* e = f.find(name);
  EXPECT_NE(e, nullptr) << f.path() << " lacks " << name;
  if (!e) return {};
  std::vector<float> v(size_t(numel(e->shape)));
  read_as_f32(*e, v.data());
  return v;
}

inline std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * r.normal();
  return v;
}

inline std::vector<float> to_f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ||a - b|| / ||b|| over the whole vector.
template <class A, class B>
double rel_l2(const A& a, const B& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    num += d * d;
    den += double(b[i]) * double(b[i]);
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// Checks an analytic gradient of loss() w.r.t. x against float64 central differences on up to
// max_coords coordinates (all when x is small). Returns max |analytic - numeric| / max |numeric|.
inline double fd_error(std::vector<double>& x, const std::vector<double>& analytic, const std::function<double()>& loss,
                       int max_coords = 64, double h = 1e-5) {
  EXPECT_EQ(x.size(), analytic.size());
  std::vector<size_t> idx(x.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (idx.size() > size_t(max_coords)) {  // spread the checked coordinates over the whole tensor
    Rng r(x.size());
    for (size_t i = 0; i < size_t(max_coords); ++i)
      std::swap(idx[i], idx[i + size_t(r.below(int64_t(idx.size() - i)))]);
    idx.resize(size_t(max_coords));
  }
  double max_err = 0, max_num = 1e-12;
  for (size_t i : idx) {
    double keep = x[i];
    x[i] = keep + h;
    double lp = loss();
    x[i] = keep - h;
    double lm = loss();
    x[i] = keep;
    double num = (lp - lm) / (2 * h);
    // The difference quotient carries the rounding of both loss values, amplified by 1 / 2h: a gradient near zero
    // (a key bias, nearly cancelled by the softmax) is otherwise judged on that noise alone.
    const double noise = 8 * std::numeric_limits<double>::epsilon() * std::max(std::fabs(lp), std::fabs(lm)) / (2 * h);
    max_err = std::max(max_err, std::fabs(num - analytic[i]) - noise);
    max_num = std::max(max_num, std::fabs(num));
  }
  return max_err / max_num;
}

// The message of the ms::Error that f throws; a test failure (and "(no error)") when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ms::Error thrown";
  return "(no error)";
}

// Float64 finite differences agree with analytic gradients to about h^2 * f''' / f': 1e-6 leaves margin.
constexpr double kFdTol = 1e-6;
// Float32 kernels against the same kernel in float64: a few ulps of accumulated rounding.
constexpr double kF32Tol = 2e-5;

}  // namespace ms::test
