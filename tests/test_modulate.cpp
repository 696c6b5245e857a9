#include "ops/modulate.h"

#include "test_util.h"

namespace ms::test {

// Shift, scale and gate are chunks 0, 1, 2 of e0 [B, 6C], as in a block: rows are 6C apart.
constexpr int64_t kChunks = 6;

TEST(Modulate, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, L = 5, C = 7, S = kChunks * C;
  auto x = randn(B * L * C, 1), e0 = randn(B * S, 2), r = randn(B * L * C, 3);
  auto loss = [&] {
    std::vector<double> y(B * L * C);  // [B, L, C]
    cpu::modulate_forward(x.data(), e0.data(), e0.data() + C, y.data(), B, L, C, S);
    return dot(y, r);
  };
  std::vector<double> dx(B * L * C, 0.5), de0(B * S, 0.25);  // non-zero: backward accumulates
  cpu::modulate_backward(x.data(), e0.data() + C, r.data(), dx.data(), de0.data(), de0.data() + C, B, L, C, S);
  for (auto& v : dx) v -= 0.5;
  for (auto& v : de0) v -= 0.25;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(e0, de0, loss, 1000), kFdTol);  // every coordinate: the other chunks must stay 0

  std::vector<double> de0_skip(B * S, 0.25);  // [B, 6C]; dx null must only skip dx
  cpu::modulate_backward<double>(x.data(), e0.data() + C, r.data(), nullptr, de0_skip.data(), de0_skip.data() + C, B,
                                 L, C, S);
  for (auto& v : de0_skip) v -= 0.25;
  EXPECT_EQ(de0_skip, de0);
}

TEST(Modulate, MatchesElementFormula) {
  const int64_t B = 3, L = 4, C = 5, S = kChunks * C;
  auto x = randn(B * L * C, 4), e0 = randn(B * S, 5);
  std::vector<double> y(B * L * C);  // [B, L, C]
  cpu::modulate_forward(x.data(), e0.data() + 3 * C, e0.data() + 4 * C, y.data(), B, L, C, S);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (b * L + l) * C + c;
        EXPECT_EQ(y[i], x[i] * (1 + e0[b * S + 4 * C + c]) + e0[b * S + 3 * C + c]);
      }
}

TEST(GateResidual, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, L = 5, C = 7, S = kChunks * C;
  auto x = randn(B * L * C, 6), y = randn(B * L * C, 7), e0 = randn(B * S, 8), r = randn(B * L * C, 9);
  const double* gate = e0.data() + 2 * C;  // chunk 2 of e0
  auto loss = [&] {
    std::vector<double> out(B * L * C);  // [B, L, C]
    cpu::gate_residual_forward(x.data(), y.data(), gate, out.data(), B, L, C, S);
    return dot(out, r);
  };
  std::vector<double> dx(B * L * C, 0.5), dy(B * L * C, -0.5), de0(B * S, 0.25);  // non-zero: accumulates
  cpu::gate_residual_backward(y.data(), gate, r.data(), dx.data(), dy.data(), de0.data() + 2 * C, B, L, C, S);
  for (auto& v : dx) v -= 0.5;
  for (auto& v : dy) v += 0.5;
  for (auto& v : de0) v -= 0.25;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(y, dy, loss), kFdTol);
  EXPECT_LT(fd_error(e0, de0, loss, 1000), kFdTol);
}

TEST(GateResidual, NullGateIsPlainResidual) {
  const int64_t B = 2, L = 3, C = 5;
  auto x = randn(B * L * C, 10), y = randn(B * L * C, 11), dout = randn(B * L * C, 12);
  std::vector<double> out(B * L * C);  // [B, L, C]
  cpu::gate_residual_forward<double>(x.data(), y.data(), nullptr, out.data(), B, L, C, 0);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], x[i] + y[i]);
  std::vector<double> dy(B * L * C, 1.0);  // [B, L, C]
  cpu::gate_residual_backward<double>(y.data(), nullptr, dout.data(), nullptr, dy.data(), nullptr, B, L, C, 0);
  for (size_t i = 0; i < dy.size(); ++i) EXPECT_EQ(dy[i], 1.0 + dout[i]);
}

TEST(Modulate, FloatMatchesDouble) {
  const int64_t B = 3, L = 41, C = 131, S = kChunks * C;
  auto x = randn(B * L * C, 13), y = randn(B * L * C, 14), e0 = randn(B * S, 15), dy = randn(B * L * C, 16);
  std::vector<double> m(B * L * C), o(B * L * C), dx(B * L * C, 0.0), de0(B * S, 0.0), dyy(B * L * C, 0.0);
  cpu::modulate_forward(x.data(), e0.data(), e0.data() + C, m.data(), B, L, C, S);
  cpu::modulate_backward(x.data(), e0.data() + C, dy.data(), dx.data(), de0.data(), de0.data() + C, B, L, C, S);
  cpu::gate_residual_forward(x.data(), y.data(), e0.data() + 2 * C, o.data(), B, L, C, S);
  cpu::gate_residual_backward(y.data(), e0.data() + 2 * C, dy.data(), dx.data(), dyy.data(), de0.data() + 2 * C, B, L,
                              C, S);
  auto xf = to_f32(x), yf = to_f32(y), e0f = to_f32(e0), dyf = to_f32(dy);
  std::vector<float> mf(B * L * C), of(B * L * C), dxf(B * L * C, 0.f), de0f(B * S, 0.f), dyyf(B * L * C, 0.f);
  cpu::modulate_forward(xf.data(), e0f.data(), e0f.data() + C, mf.data(), B, L, C, S);
  cpu::modulate_backward(xf.data(), e0f.data() + C, dyf.data(), dxf.data(), de0f.data(), de0f.data() + C, B, L, C, S);
  cpu::gate_residual_forward(xf.data(), yf.data(), e0f.data() + 2 * C, of.data(), B, L, C, S);
  cpu::gate_residual_backward(yf.data(), e0f.data() + 2 * C, dyf.data(), dxf.data(), dyyf.data(), de0f.data() + 2 * C,
                              B, L, C, S);
  EXPECT_LT(rel_l2(mf, m), kF32Tol);
  EXPECT_LT(rel_l2(of, o), kF32Tol);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  EXPECT_LT(rel_l2(dyyf, dyy), kF32Tol);
  EXPECT_LT(rel_l2(de0f, de0), kF32Tol);
}

}  // namespace ms::test
