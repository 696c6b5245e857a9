#include <cmath>
#include <limits>

#include "ops/activation.h"
#include "test_util.h"

namespace ms::test {

using Fwd = void (*)(const ActivationParams<double>&);
using Bwd = void (*)(const ActivationParams<double>&);

static void check_gradient(Fwd fwd, Bwd bwd) {
  const int64_t n = 37;
  auto x = randn(n, 1, 2.0), r = randn(n, 2);
  auto loss = [&] {
    std::vector<double> y(n);  // [n]
    fwd({.x = x.data(), .y = y.data(), .n = n});
    return dot(y, r);
  };
  std::vector<double> dx(n, 0.5);  // [n]; non-zero: backward accumulates
  bwd({.x = x.data(), .dy = r.data(), .dx = dx.data(), .n = n});
  for (auto& v : dx) v -= 0.5;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
}

TEST(Activation, GradientsMatchFiniteDifferences) {
  check_gradient(cpu::gelu_tanh_forward<double>, cpu::gelu_tanh_backward<double>);
  check_gradient(cpu::silu_forward<double>, cpu::silu_backward<double>);
}

TEST(Activation, FloatMatchesDouble) {
  const int64_t n = 40001;  // above the parallel threshold
  auto x = randn(n, 3, 3.0), dy = randn(n, 4);
  auto xf = to_f32(x), dyf = to_f32(dy);
  std::vector<double> y(n), dx(n, 0.0);
  std::vector<float> yf(n), dxf(n, 0.f);
  cpu::gelu_tanh_forward<double>({.x = x.data(), .y = y.data(), .n = n});
  cpu::gelu_tanh_forward<float>({.x = xf.data(), .y = yf.data(), .n = n});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  cpu::gelu_tanh_backward<double>({.x = x.data(), .dy = dy.data(), .dx = dx.data(), .n = n});
  cpu::gelu_tanh_backward<float>({.x = xf.data(), .dy = dyf.data(), .dx = dxf.data(), .n = n});
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  cpu::silu_forward<double>({.x = x.data(), .y = y.data(), .n = n});
  cpu::silu_forward<float>({.x = xf.data(), .y = yf.data(), .n = n});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  cpu::silu_backward<double>({.x = x.data(), .dy = dy.data(), .dx = dx.data(), .n = n});
  cpu::silu_backward<float>({.x = xf.data(), .dy = dyf.data(), .dx = dxf.data(), .n = n});
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
}

TEST(Activation, KnownValues) {
  const std::vector<double> x = {0.0, 1.0, -2.0, 40.0, -40.0};
  std::vector<double> g(x.size()), s(x.size());
  cpu::gelu_tanh_forward<double>({.x = x.data(), .y = g.data(), .n = int64_t(x.size())});
  cpu::silu_forward<double>({.x = x.data(), .y = s.data(), .n = int64_t(x.size())});
  // Values of torch.nn.functional.gelu(approximate="tanh") and silu.
  const std::vector<double> g_ref = {0.0, 0.8411919906082768, -0.04540230591222494, 40.0, 0.0};
  const std::vector<double> s_ref = {0.0, 0.7310585786300049, -0.2384058440442351, 40.0, 0.0};
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(g[i], g_ref[i], 1e-15);
    EXPECT_NEAR(s[i], s_ref[i], 1e-15);
  }
}

TEST(Activation, OddPartIsIdentity) {
  // gelu(x) - gelu(-x) = x and silu(x) - silu(-x) = x, for both activations.
  const int64_t n = 21;
  auto x = randn(n, 5, 2.0), xm = x;
  for (auto& v : xm) v = -v;
  for (Fwd fwd : {Fwd(cpu::gelu_tanh_forward<double>), Fwd(cpu::silu_forward<double>)}) {
    std::vector<double> yp(n), ym(n);  // [n]
    fwd({.x = x.data(), .y = yp.data(), .n = n});
    fwd({.x = xm.data(), .y = ym.data(), .n = n});
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(yp[i] - ym[i], x[i], 1e-14);
  }
}

// Every element against a long-double closed form, over the whole range where the activations bend or saturate
// (odd lengths, so that the last partial vector is checked too): x sigmoid(z) and its derivative
// s + x s (1 - s) z', with 1 - s = e / (1 + e), e = exp(-z), exact in long double however close s is to 1. Errors are
// relative to the value, or for the derivative (which crosses zero) to the sum of its terms' magnitudes, times the
// condition number 1 + |z| of exp(-z) (z is rounded to T: a relative error r in it is a relative error r |z| in e,
// 3e-5 at z = -74, x = -9.4 in float); and absolute below 64 times T's smallest normal number, where exp(-z)
// overflows and the result is 0 (GELU's left tail: exp(-z) overflows in float from x = -10.07, where GELU is
// -2e-38; it is 1e-857 at x = -30).
template <class T>
static void check_closed_form(bool gelu, double tol) {
  const int64_t n = 4001;
  std::vector<T> x(n), y(n), dy(n), dx(n);
  auto r = randn(n, 11);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = T(-30.0 + 60.0 * double(i) / double(n - 1) + 0.01 * r[i]);  // [-30, 30], not on a grid
    dy[i] = T(1.0 + 0.5 * r[i]);
    dx[i] = T(0.25);  // backward accumulates
  }
  (gelu ? cpu::gelu_tanh_forward<T> : cpu::silu_forward<T>)({.x = x.data(), .y = y.data(), .n = n});
  (gelu ? cpu::gelu_tanh_backward<T>
        : cpu::silu_backward<T>)({.x = x.data(), .dy = dy.data(), .dx = dx.data(), .n = n});
  const long double k = 0.79788456080286535587989211986876L, a = 0.044715L;
  for (int64_t i = 0; i < n; ++i) {
    const long double v = x[i], z = gelu ? 2 * k * (v + a * v * v * v) : v, dz = gelu ? 2 * k * (1 + 3 * a * v * v) : 1;
    const long double e = std::exp(-z), s = 1 / (1 + e), slope_term = v * s * (e / (1 + e)) * dz;
    const long double ref_y = v * s, ref_dx = 0.25L + dy[i] * (s + slope_term);
    const long double tiny = 64 * std::numeric_limits<T>::min(), cond = 1 + std::fabs(z);
    EXPECT_LE(std::fabs(y[i] - ref_y), tol * cond * std::fabs(ref_y) + tiny) << "x = " << x[i];
    EXPECT_LE(std::fabs(dx[i] - ref_dx), tol * cond * (0.25L + std::fabs(dy[i]) * (s + std::fabs(slope_term))) + tiny)
        << "x = " << x[i];
  }
}

TEST(Activation, MatchClosedFormAcrossTheRange) {
  for (bool gelu : {true, false}) {
    check_closed_form<float>(gelu, 2e-6);    // 16 ulp: exp (1 ulp), a division and a few products
    check_closed_form<double>(gelu, 4e-15);  // the same in ulp of double
  }
}

TEST(Activation, NanPropagates) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t n : {1, 19}) {  // the last partial vector, and a full vector before it
    std::vector<double> x(size_t(n), 0.5), dy(size_t(n), 1.0);
    x.back() = nan;
    for (bool gelu : {true, false}) {
      std::vector<double> y(size_t(n), 0.0), dx(size_t(n), 0.0);
      (gelu ? cpu::gelu_tanh_forward<double> : cpu::silu_forward<double>)({.x = x.data(), .y = y.data(), .n = n});
      (gelu ? cpu::gelu_tanh_backward<double>
            : cpu::silu_backward<double>)({.x = x.data(), .dy = dy.data(), .dx = dx.data(), .n = n});
      EXPECT_TRUE(std::isnan(y.back()));
      EXPECT_TRUE(std::isnan(dx.back()));
      if (n > 1) {
        EXPECT_FALSE(std::isnan(y.front()));
        EXPECT_FALSE(std::isnan(dx.front()));
      }
    }
  }
}

}  // namespace ms::test
