#include "ops/layernorm.h"
#include "test_util.h"

namespace ms::test {

constexpr double kLnEps = 1e-6;

TEST(LayerNorm, GradientsMatchFiniteDifferences) {
  const int64_t N = 7, C = 13;
  auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), r = randn(N * C, 4);
  std::vector<double> mean(N), rstd(N);  // [N]
  auto loss = [&] {
    std::vector<double> y(N * C);  // [N, C]
    cpu::layernorm_forward<double>({.x = x.data(),
                                    .w = w.data(),
                                    .b = b.data(),
                                    .y = y.data(),
                                    .mean = mean.data(),
                                    .rstd = rstd.data(),
                                    .N = N,
                                    .C = C,
                                    .eps = kLnEps});
    return dot(y, r);
  };
  loss();
  std::vector<double> dx(N * C, 0.5), dw(C, 0.25), db(C, -0.5);  // non-zero: backward accumulates
  cpu::layernorm_backward<double>({.x = x.data(),
                                   .w = w.data(),
                                   .mean = mean.data(),
                                   .rstd = rstd.data(),
                                   .dy = r.data(),
                                   .dx = dx.data(),
                                   .dw = dw.data(),
                                   .db = db.data(),
                                   .N = N,
                                   .C = C});
  for (auto& v : dx) v -= 0.5;
  for (auto& v : dw) v -= 0.25;
  for (auto& v : db) v += 0.5;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(w, dw, loss), kFdTol);
  EXPECT_LT(fd_error(b, db, loss), kFdTol);
}

TEST(LayerNorm, GradientsWithoutAffine) {
  const int64_t N = 5, C = 11;
  auto x = randn(N * C, 5), r = randn(N * C, 6);
  std::vector<double> mean(N), rstd(N);  // [N]
  auto loss = [&] {
    std::vector<double> y(N * C);  // [N, C]
    cpu::layernorm_forward<double>(
        {.x = x.data(), .y = y.data(), .mean = mean.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kLnEps});
    return dot(y, r);
  };
  loss();
  std::vector<double> dx(N * C, 0.5);  // [N, C]
  cpu::layernorm_backward<double>(
      {.x = x.data(), .mean = mean.data(), .rstd = rstd.data(), .dy = r.data(), .dx = dx.data(), .N = N, .C = C});
  for (auto& v : dx) v -= 0.5;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
}

TEST(LayerNorm, FloatMatchesDouble) {
  const int64_t N = 37, C = 129;
  auto x = randn(N * C, 7, 3.0), w = randn(C, 8), b = randn(C, 9), dy = randn(N * C, 10);
  std::vector<double> y(N * C), mean(N), rstd(N), dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
  cpu::layernorm_forward<double>({.x = x.data(),
                                  .w = w.data(),
                                  .b = b.data(),
                                  .y = y.data(),
                                  .mean = mean.data(),
                                  .rstd = rstd.data(),
                                  .N = N,
                                  .C = C,
                                  .eps = kLnEps});
  cpu::layernorm_backward<double>({.x = x.data(),
                                   .w = w.data(),
                                   .mean = mean.data(),
                                   .rstd = rstd.data(),
                                   .dy = dy.data(),
                                   .dx = dx.data(),
                                   .dw = dw.data(),
                                   .db = db.data(),
                                   .N = N,
                                   .C = C});
  auto xf = to_f32(x), wf = to_f32(w), bf = to_f32(b), dyf = to_f32(dy);
  std::vector<float> yf(N * C), meanf(N), rstdf(N), dxf(N * C, 0.f), dwf(C, 0.f), dbf(C, 0.f);
  cpu::layernorm_forward<float>({.x = xf.data(),
                                 .w = wf.data(),
                                 .b = bf.data(),
                                 .y = yf.data(),
                                 .mean = meanf.data(),
                                 .rstd = rstdf.data(),
                                 .N = N,
                                 .C = C,
                                 .eps = kLnEps});
  cpu::layernorm_backward<float>({.x = xf.data(),
                                  .w = wf.data(),
                                  .mean = meanf.data(),
                                  .rstd = rstdf.data(),
                                  .dy = dyf.data(),
                                  .dx = dxf.data(),
                                  .dw = dwf.data(),
                                  .db = dbf.data(),
                                  .N = N,
                                  .C = C});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  EXPECT_LT(rel_l2(dwf, dw), kF32Tol);
  EXPECT_LT(rel_l2(dbf, db), kF32Tol);
}

TEST(LayerNorm, RowsHaveZeroMeanUnitVariance) {
  const int64_t N = 9, C = 31;
  auto x = randn(N * C, 11, 4.0);
  for (auto& v : x) v += 2.0;
  std::vector<double> y(N * C), mean(N), rstd(N);
  cpu::layernorm_forward<double>(
      {.x = x.data(), .y = y.data(), .mean = mean.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = kLnEps});
  for (int64_t n = 0; n < N; ++n) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < C; ++c) m += y[n * C + c] / C;
    for (int64_t c = 0; c < C; ++c) v += (y[n * C + c] - m) * (y[n * C + c] - m) / C;
    EXPECT_NEAR(m, 0.0, 1e-12);
    EXPECT_NEAR(v, 1.0, 1e-6);  // var / (var + eps) with var ~ 16
  }
}

}  // namespace ms::test
