#include "ops/linear.h"

#include "test_util.h"

namespace ms::test {

TEST(Linear, GradientsMatchFiniteDifferences) {
  const int64_t N = 7, in = 5, out = 3;
  auto x = randn(N * in, 1), w = randn(out * in, 2), b = randn(out, 3), r = randn(N * out, 4);
  auto loss = [&] {
    std::vector<double> y(N * out);
    cpu::linear_forward<double>(
        {.x = x.data(), .w = w.data(), .b = b.data(), .y = y.data(), .N = N, .in = in, .out = out});
    return dot(y, r);
  };
  std::vector<double> dx(N * in, 0.5), dw(out * in, 0.0), db(out, 0.0);  // dx starts non-zero: backward accumulates
  cpu::linear_backward<double>({.x = x.data(),
                                .w = w.data(),
                                .dy = r.data(),
                                .dx = dx.data(),
                                .dw = dw.data(),
                                .db = db.data(),
                                .N = N,
                                .in = in,
                                .out = out});
  for (auto& v : dx) v -= 0.5;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(w, dw, loss), kFdTol);
  EXPECT_LT(fd_error(b, db, loss), kFdTol);
}

TEST(Linear, FloatMatchesDouble) {
  const int64_t N = 33, in = 17, out = 9;
  auto x = randn(N * in, 5), w = randn(out * in, 6), b = randn(out, 7);
  std::vector<double> y(N * out);
  cpu::linear_forward<double>(
      {.x = x.data(), .w = w.data(), .b = b.data(), .y = y.data(), .N = N, .in = in, .out = out});
  auto xf = to_f32(x), wf = to_f32(w), bf = to_f32(b);
  std::vector<float> yf(N * out);
  cpu::linear_forward<float>(
      {.x = xf.data(), .w = wf.data(), .b = bf.data(), .y = yf.data(), .N = N, .in = in, .out = out});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
}

}  // namespace ms::test
