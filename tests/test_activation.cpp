#include "ops/activation.h"

#include "test_util.h"

namespace ms::test {

using Fwd = void (*)(const double*, double*, int64_t);
using Bwd = void (*)(const double*, const double*, double*, int64_t);

static void check_gradient(Fwd fwd, Bwd bwd) {
  const int64_t n = 37;
  auto x = randn(n, 1, 2.0), r = randn(n, 2);
  auto loss = [&] {
    std::vector<double> y(n);  // [n]
    fwd(x.data(), y.data(), n);
    return dot(y, r);
  };
  std::vector<double> dx(n, 0.5);  // [n]; non-zero: backward accumulates
  bwd(x.data(), r.data(), dx.data(), n);
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
  cpu::gelu_tanh_forward(x.data(), y.data(), n);
  cpu::gelu_tanh_forward(xf.data(), yf.data(), n);
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  cpu::gelu_tanh_backward(x.data(), dy.data(), dx.data(), n);
  cpu::gelu_tanh_backward(xf.data(), dyf.data(), dxf.data(), n);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  cpu::silu_forward(x.data(), y.data(), n);
  cpu::silu_forward(xf.data(), yf.data(), n);
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  cpu::silu_backward(x.data(), dy.data(), dx.data(), n);
  cpu::silu_backward(xf.data(), dyf.data(), dxf.data(), n);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
}

TEST(Activation, KnownValues) {
  const std::vector<double> x = {0.0, 1.0, -2.0, 40.0, -40.0};
  std::vector<double> g(x.size()), s(x.size());
  cpu::gelu_tanh_forward(x.data(), g.data(), int64_t(x.size()));
  cpu::silu_forward(x.data(), s.data(), int64_t(x.size()));
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
    fwd(x.data(), yp.data(), n);
    fwd(xm.data(), ym.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(yp[i] - ym[i], x[i], 1e-14);
  }
}

}  // namespace ms::test
