#include "ops/rmsnorm.h"
#include "test_util.h"

namespace ms::test {

constexpr double kRmsEps = 1e-6;

TEST(RmsNorm, GradientsMatchFiniteDifferences) {
  const int64_t N = 7, C = 13;
  auto x = randn(N * C, 1), w = randn(C, 2), r = randn(N * C, 3);
  std::vector<double> rstd(N);  // [N]
  auto loss = [&] {
    std::vector<double> y(N * C);  // [N, C]
    cpu::rmsnorm_forward<double>(
        {.x = x.data(), .w = w.data(), .y = y.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kRmsEps});
    return dot(y, r);
  };
  loss();
  std::vector<double> dx(N * C, 0.5), dw(C, 0.25);  // non-zero: backward accumulates
  cpu::rmsnorm_backward<double>({.x = x.data(),
                                 .w = w.data(),
                                 .rstd = rstd.data(),
                                 .dy = r.data(),
                                 .dx = dx.data(),
                                 .dw = dw.data(),
                                 .N = N,
                                 .C = C});
  for (auto& v : dx) v -= 0.5;
  for (auto& v : dw) v -= 0.25;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(w, dw, loss), kFdTol);
}

TEST(RmsNorm, FloatMatchesDouble) {
  const int64_t N = 37, C = 129;
  auto x = randn(N * C, 4, 3.0), w = randn(C, 5), dy = randn(N * C, 6);
  std::vector<double> y(N * C), rstd(N), dx(N * C, 0.0), dw(C, 0.0);
  cpu::rmsnorm_forward<double>(
      {.x = x.data(), .w = w.data(), .y = y.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kRmsEps});
  cpu::rmsnorm_backward<double>({.x = x.data(),
                                 .w = w.data(),
                                 .rstd = rstd.data(),
                                 .dy = dy.data(),
                                 .dx = dx.data(),
                                 .dw = dw.data(),
                                 .N = N,
                                 .C = C});
  auto xf = to_f32(x), wf = to_f32(w), dyf = to_f32(dy);
  std::vector<float> yf(N * C), rstdf(N), dxf(N * C, 0.f), dwf(C, 0.f);
  cpu::rmsnorm_forward<float>(
      {.x = xf.data(), .w = wf.data(), .y = yf.data(), .rstd = rstdf.data(), .N = N, .C = C, .eps = kRmsEps});
  cpu::rmsnorm_backward<float>({.x = xf.data(),
                                .w = wf.data(),
                                .rstd = rstdf.data(),
                                .dy = dyf.data(),
                                .dx = dxf.data(),
                                .dw = dwf.data(),
                                .N = N,
                                .C = C});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  EXPECT_LT(rel_l2(dwf, dw), kF32Tol);
}

TEST(RmsNorm, UnitWeightGivesUnitMeanSquare) {
  const int64_t N = 9, C = 31;
  auto x = randn(N * C, 7, 5.0);
  std::vector<double> w(C, 1.0), y(N * C), rstd(N);
  cpu::rmsnorm_forward<double>(
      {.x = x.data(), .w = w.data(), .y = y.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kRmsEps});
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0, xs = 0;
    for (int64_t c = 0; c < C; ++c) ms += y[n * C + c] * y[n * C + c] / C, xs += x[n * C + c] * x[n * C + c] / C;
    EXPECT_NEAR(ms, 1.0, 1e-6);  // ms / (ms + eps) with ms ~ 25
    EXPECT_NEAR(rstd[n], 1.0 / std::sqrt(xs + kRmsEps), 1e-12);
  }
}

}  // namespace ms::test
