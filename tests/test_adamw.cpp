// CPU AdamW: the SIMD kernel on every Highway target equals the scalar reference bit for bit; the
// reference follows torch.optim.AdamW (float64 closed form); `megaslide op adamw` end to end.
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

#include "cli_util.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "temp_dir.h"
#include "test_util.h"
#include "train/adamw.h"

namespace ms::test {
namespace {

struct State {
  std::vector<float> master, m, v;  // [n] each
  std::vector<uint16_t> weights;    // [n] bf16 bits
};

State random_state(size_t n, uint64_t seed) {
  State s{to_f32(randn(n, seed)), to_f32(randn(n, seed + 1, 0.1)), to_f32(randn(n, seed + 2, 0.1)), {}};
  for (float& x : s.v) x *= x;  // second moments are >= 0
  s.weights.assign(n, 0);
  return s;
}

void update(bool simd, const AdamWConfig& c, double lr, int64_t t, float grad_scale, const std::vector<float>& grad,
            State& s) {
  (simd ? adamw_update : adamw_update_reference)(c, lr, t, grad_scale, grad.data(), s.master.data(), s.m.data(),
                                                 s.v.data(), s.weights.data(), int64_t(grad.size()));
}

// Elements of a and b whose bits differ; with nan_equal, two NaNs count as equal (which NaN an op
// returns when both operands are NaN depends on the compiler's operand order, not on the kernel).
template <class T>
int64_t mismatches(const std::vector<T>& a, const std::vector<T>& b, bool nan_equal = false) {
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>)
      if (nan_equal && std::isnan(a[i]) && std::isnan(b[i])) continue;
    bad += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  }
  return bad;
}

void expect_same_state(const State& simd, const State& ref, bool nan_equal = false) {
  EXPECT_EQ(mismatches(simd.master, ref.master, nan_equal), 0);
  EXPECT_EQ(mismatches(simd.m, ref.m, nan_equal), 0);
  EXPECT_EQ(mismatches(simd.v, ref.v, nan_equal), 0);
  std::vector<uint16_t> expect(simd.master.size());  // the kernel's weights are f32_to_bf16 of its own master
  for (size_t i = 0; i < expect.size(); ++i) expect[i] = f32_to_bf16(simd.master[i]);
  EXPECT_EQ(mismatches(simd.weights, expect), 0);
}

// Runs fn with adamw_update dispatching to each Highway target this build and CPU have.
void for_each_target(const std::function<void()>& fn) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(adamw_simd_target(), hwy::TargetName(target));
    fn();
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(AdamW, SimdMatchesReferenceBitExactOnEveryTarget) {
  const AdamWConfig c{0.9, 0.999, 1e-8, 0.1};
  for_each_target([&] {
    for (size_t n : {1, 7, 1023, 100003}) {  // 100003: several parallel chunks and a partial vector
      SCOPED_TRACE(n);
      State simd = random_state(n, n), ref = simd;
      for (int64_t t = 1; t <= 3; ++t) {
        const auto grad = to_f32(randn(n, 100 + uint64_t(t)));
        update(true, c, 1e-2, t, 0.37f, grad, simd);
        update(false, c, 1e-2, t, 0.37f, grad, ref);
      }
      expect_same_state(simd, ref);
    }
  });
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(AdamW, Bf16RoundsToNearestEvenAndKeepsNaNs) {
  // lr = 0 leaves master unchanged, so the weights are bf16 of these values.
  const std::vector<std::pair<uint32_t, uint16_t>> cases = {
      {0x3f808000, 0x3f80},  // tie, even below: down
      {0x3f818000, 0x3f82},  // tie, odd below: up
      {0x3f808001, 0x3f81},  // above the tie
      {0x3f807fff, 0x3f80},  // below the tie
      {0xbf818000, 0xbf82},  // negative tie, odd below: away from zero
      {0x7f7fffff, 0x7f80},  // FLT_MAX rounds to +Inf
      {0x7f800000, 0x7f80},  // +Inf
      {0xff800000, 0xff80},  // -Inf
      {0x00000001, 0x0000},  // smallest subnormal
      {0x80000000, 0x8000},  // -0
      {0x7fc00000, 0x7fc0},  // quiet NaN
      {0x7f800001, 0x7fc0},  // signalling NaN, quieted by the update's multiply
      {0x7fffffff, 0x7fff},  // NaN whose rounding would carry into the sign: kept NaN
      {0xffffffff, 0xffff},  // negative NaN
  };
  const size_t reps = 3;  // 42 elements: full vectors and a partial one on every target
  State s0{{},
           std::vector<float>(cases.size() * reps, 0.0f),
           std::vector<float>(cases.size() * reps, 0.0f),
           std::vector<uint16_t>(cases.size() * reps, 0)};
  for (size_t r = 0; r < reps; ++r)
    for (const auto& [bits, bf16] : cases) s0.master.push_back(from_bits(bits));
  const std::vector<float> grad(s0.master.size(), 0.0f);
  for_each_target([&] {
    State s = s0;
    update(true, AdamWConfig{}, 0.0, 1, 1.0f, grad, s);
    for (size_t i = 0; i < s.weights.size(); ++i)
      EXPECT_EQ(s.weights[i], cases[i % cases.size()].second)
          << "master bits " << std::hex << cases[i % cases.size()].first;
  });
}

TEST(AdamW, NonFiniteInputsMatchReference) {
  const size_t n = 77;
  State s0 = random_state(n, 5);
  auto grad = to_f32(randn(n, 6));
  const float inf = INFINITY, nan = NAN;
  for (size_t i = 0; i < n; i += 7) {
    grad[i] = nan;
    grad[i + 1] = inf;
    grad[i + 2] = -inf;
    grad[i + 3] = 3e38f;  // g * g overflows
    s0.m[i + 4] = inf;
    s0.v[i + 5] = nan;
    s0.master[i + 6] = -inf;
  }
  State ref = s0;
  update(false, AdamWConfig{}, 1e-2, 2, 0.5f, grad, ref);
  for (size_t i = 0; i < n; i += 7) EXPECT_TRUE(std::isnan(ref.master[i])) << i;
  for_each_target([&] {
    State simd = s0;
    update(true, AdamWConfig{}, 1e-2, 2, 0.5f, grad, simd);
    expect_same_state(simd, ref, /*nan_equal=*/true);
  });
}

TEST(AdamW, MatchesFloat64ClosedFormOverThreeSteps) {
  const double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  const std::vector<double> p0 = {0.5, -1.25, 3.0, 1e-3, -0.02};
  const std::vector<std::vector<double>> grads = {
      {0.1, -2.0, 0.3, 1e-4, 5.0}, {0.2, -1.5, -0.3, 2e-4, 4.0}, {-0.05, -1.0, 0.25, 3e-4, 6.0}};
  std::vector<double> p = p0, m(p0.size(), 0.0), v(p0.size(), 0.0);
  State s{{p0.begin(), p0.end()},
          std::vector<float>(p0.size(), 0.0f),
          std::vector<float>(p0.size(), 0.0f),
          std::vector<uint16_t>(p0.size(), 0)};
  for (int t = 1; t <= 3; ++t) {
    const auto& g = grads[size_t(t - 1)];
    update(true, AdamWConfig{b1, b2, eps, wd}, lr, t, 1.0f, {g.begin(), g.end()}, s);
    for (size_t i = 0; i < p.size(); ++i) {  // torch.optim.AdamW, step t, in float64
      p[i] *= 1 - lr * wd;
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
      p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
    }
  }
  // Each value goes through ~10 float roundings (6e-8 relative each) per step; seen: <= 1.6e-7
  // relative. 5e-7 (~4 ulp) still fails on any slip in a term (a missing bias correction moves p ~1e-3).
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_NEAR(s.master[i], p[i], 5e-7 * std::abs(p[i])) << i;
    EXPECT_NEAR(s.m[i], m[i], 5e-7 * std::abs(m[i])) << i;
    EXPECT_NEAR(s.v[i], v[i], 5e-7 * std::abs(v[i])) << i;
  }
}

TEST(AdamW, SumSquaresSameForAnyThreadCount) {
  const auto x = to_f32(randn(300007, 9));
  const int keep = omp_get_max_threads();
  omp_set_num_threads(1);
  const double s1 = sum_squares(x.data(), int64_t(x.size()));
  omp_set_num_threads(2);
  const double s2 = sum_squares(x.data(), int64_t(x.size()));
  omp_set_num_threads(3);
  const double s3 = sum_squares(x.data(), int64_t(x.size()));
  omp_set_num_threads(keep);
  EXPECT_EQ(std::memcmp(&s1, &s2, 8), 0);
  EXPECT_EQ(std::memcmp(&s1, &s3, 8), 0);
  long double exact = 0;
  for (float f : x) exact += (long double)f * f;
  EXPECT_NEAR(s1, double(exact), 1e-12 * double(exact));  // 3e5 double adds: ~1e-13 relative at worst
}

struct OpInputs {
  State state;
  std::vector<float> grad;
};

// Writes random param, exp_avg, exp_avg_sq of `shape` and grad of `grad_shape` to path, leaving out
// the tensor named `drop`.
OpInputs write_op_inputs(const std::string& path, const Shape& shape, const Shape& grad_shape,
                         const std::string& drop = "") {
  OpInputs in{random_state(size_t(numel(shape)), 21), to_f32(randn(size_t(numel(grad_shape)), 22))};
  std::vector<TensorRef> refs;
  for (const TensorRef& r : {TensorRef{"param", DType::f32, shape, in.state.master.data()},
                             TensorRef{"grad", DType::f32, grad_shape, in.grad.data()},
                             TensorRef{"exp_avg", DType::f32, shape, in.state.m.data()},
                             TensorRef{"exp_avg_sq", DType::f32, shape, in.state.v.data()}})
    if (r.name != drop) refs.push_back(r);
  write_safetensors(path, refs);
  return in;
}

void expect_tensor(const SafetensorsFile& f, const std::string& name, DType dtype, const Shape& shape,
                   const void* data) {
  const TensorEntry* e = f.find(name);
  ASSERT_NE(e, nullptr) << name;
  EXPECT_EQ(e->dtype, dtype) << name;
  EXPECT_EQ(e->shape, shape) << name;
  ASSERT_EQ(e->nbytes, numel(shape) * dtype_size(dtype)) << name;
  EXPECT_EQ(std::memcmp(e->data, data, size_t(e->nbytes)), 0) << name;
}

TEST(AdamW, OpVerbMatchesReference) {
  TempDir d;
  const Shape shape{3, 5, 7};
  OpInputs in = write_op_inputs(d.file("in.safetensors"), shape, shape);
  const CliResult r = run_cli(cat("op adamw --inputs ", d.file("in.safetensors"), " --out ", d.file("out.safetensors"),
                                  " --lr 0.01 --beta1 0.8 --beta2 0.99 --eps 1e-6 --weight-decay 0.05 --step 3"));
  ASSERT_EQ(r.code, 0) << r.output;
  update(false, AdamWConfig{0.8, 0.99, 1e-6, 0.05}, 0.01, 3, 1.0f, in.grad, in.state);
  const SafetensorsFile out = SafetensorsFile::open(d.file("out.safetensors"));
  expect_tensor(out, "param", DType::f32, shape, in.state.master.data());
  expect_tensor(out, "exp_avg", DType::f32, shape, in.state.m.data());
  expect_tensor(out, "exp_avg_sq", DType::f32, shape, in.state.v.data());
  expect_tensor(out, "param_bf16", DType::bf16, shape, in.state.weights.data());
}

TEST(AdamW, OpVerbRejectsBadInput) {
  TempDir d;
  write_op_inputs(d.file("ok.safetensors"), {4, 3}, {4, 3});
  write_op_inputs(d.file("no_v.safetensors"), {4, 3}, {4, 3}, "exp_avg_sq");
  write_op_inputs(d.file("bad_shape.safetensors"), {4, 3}, {3, 4});
  const std::string out = " --out " + d.file("out.safetensors"), ok = out + " --inputs " + d.file("ok.safetensors");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {out + " --inputs " + d.file("no_v.safetensors"), "missing tensor 'exp_avg_sq'"},
      {out + " --inputs " + d.file("bad_shape.safetensors"), "'grad' has shape [3, 4] but 'param' has [4, 3]"},
      {ok + " --step 0", "--step is the 1-based index of this update and must be >= 1, got 0"},
      {ok + " --lr -1", "--lr must be >= 0, got -1"},
      {ok + " --beta1 1", "--beta1 must be in [0, 1), got 1"},
      {ok + " --beta2 -0.5", "--beta2 must be in [0, 1), got -0.5"}};
  for (const auto& [args, message] : cases) {
    const CliResult r = run_cli("op adamw" + args);
    EXPECT_NE(r.code, 0) << args;
    EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(d.file("out.safetensors")));
}

}  // namespace
}  // namespace ms::test
