#include "ops/rope.h"

#include "test_util.h"

namespace ms::test {

TEST(Rope, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, F = 3, H = 5, W = 3, nh = 2, d = 10;  // c = 5 pairs: 3 frame, 1 height, 1 width
  const int64_t n = B * F * H * W * nh * d;
  auto x = randn(n, 1), r = randn(n, 2);
  auto loss = [&] {
    std::vector<double> y(n);  // [B, F, H, W, nh, d]
    cpu::rope_forward<double>({.x = x.data(), .y = y.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
    return dot(y, r);
  };
  std::vector<double> dx(n, 7.0);  // [B, F, H, W, nh, d]; overwritten
  cpu::rope_backward<double>({.dy = r.data(), .dx = dx.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  EXPECT_LT(fd_error(x, dx, loss, 256), kFdTol);
}

TEST(Rope, FloatMatchesDouble) {
  const int64_t B = 1, F = 5, H = 7, W = 9, nh = 3, d = 26;  // c = 13: 5 frame, 4 height, 4 width pairs
  const int64_t n = B * F * H * W * nh * d;
  auto x = randn(n, 3);
  std::vector<double> y(n);
  cpu::rope_forward<double>({.x = x.data(), .y = y.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  auto xf = to_f32(x);
  std::vector<float> yf(n);
  cpu::rope_forward<float>({.x = xf.data(), .y = yf.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
  cpu::rope_backward<double>({.dy = x.data(), .dx = y.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  cpu::rope_backward<float>({.dy = xf.data(), .dx = yf.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  EXPECT_LT(rel_l2(yf, y), kF32Tol);
}

TEST(Rope, PreservesPairNormsAndInvertsInPlace) {
  const int64_t B = 2, F = 3, H = 4, W = 5, nh = 3, d = 14;
  const int64_t n = B * F * H * W * nh * d;
  auto x = randn(n, 4);
  std::vector<double> y(n);  // [B, F, H, W, nh, d]
  cpu::rope_forward<double>({.x = x.data(), .y = y.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  for (int64_t i = 0; i < n; i += 2)
    EXPECT_NEAR(std::hypot(y[i], y[i + 1]), std::hypot(x[i], x[i + 1]), 1e-13);
  std::vector<double> z = x;  // [B, F, H, W, nh, d]; y aliases x
  cpu::rope_forward<double>({.x = z.data(), .y = z.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  EXPECT_EQ(z, y);
  cpu::rope_backward<double>({.dy = z.data(), .dx = z.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  EXPECT_LT(rel_l2(z, x), 1e-15);
}

TEST(Rope, SinglePositionIsIdentity) {
  const int64_t B = 3, nh = 2, d = 12;  // F = H = W = 1: every token is at position (0, 0, 0)
  auto x = randn(B * nh * d, 5);
  std::vector<double> y(B * nh * d);  // [B, 1, 1, 1, nh, d]
  cpu::rope_forward<double>({.x = x.data(), .y = y.data(), .B = B, .F = 1, .H = 1, .W = 1, .nh = nh, .d = d});
  EXPECT_EQ(y, x);
}

TEST(Rope, HandComputedToken) {
  // d = 12: c = 6 pairs, 2 per axis; each axis part has 4 dims, so its freqs are 1 and 10000^(-2/4) = 0.01.
  const int64_t F = 2, H = 3, W = 4, nh = 2, d = 12;
  std::vector<double> x(F * H * W * nh * d);  // [1, F, H, W, nh, d]
  for (size_t i = 0; i < x.size(); i += 2) x[i] = 1.0, x[i + 1] = 2.0;
  std::vector<double> y(x.size());
  cpu::rope_forward<double>({.x = x.data(), .y = y.data(), .B = 1, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  const int64_t f = 1, h = 2, w = 3, head = 1;
  const double angle[6] = {1.0, 0.01, 2.0, 0.02, 3.0, 0.03};  // (f, f, h, h, w, w) * (1, 0.01)
  const double* yt = y.data() + (((f * H + h) * W + w) * nh + head) * d;
  for (int i = 0; i < 6; ++i) {  // (1 + 2i) e^{i angle}
    EXPECT_NEAR(yt[2 * i], std::cos(angle[i]) - 2 * std::sin(angle[i]), 1e-14);
    EXPECT_NEAR(yt[2 * i + 1], std::sin(angle[i]) + 2 * std::cos(angle[i]), 1e-14);
  }
}

}  // namespace ms::test
