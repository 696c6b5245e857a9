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
    cpu::modulate_forward<double>({.x = x.data(),
                                   .shift = e0.data(),
                                   .scale = e0.data() + C,
                                   .y = y.data(),
                                   .B = B,
                                   .L = L,
                                   .C = C,
                                   .stride = S});
    return dot(y, r);
  };
  std::vector<double> dx(B * L * C, 0.5), de0(B * S, 0.25);  // non-zero: backward accumulates
  cpu::modulate_backward<double>({.x = x.data(),
                                  .scale = e0.data() + C,
                                  .dy = r.data(),
                                  .dx = dx.data(),
                                  .dshift = de0.data(),
                                  .dscale = de0.data() + C,
                                  .B = B,
                                  .L = L,
                                  .C = C,
                                  .stride = S});
  for (auto& v : dx) v -= 0.5;
  for (auto& v : de0) v -= 0.25;
  EXPECT_LT(fd_error(x, dx, loss), kFdTol);
  EXPECT_LT(fd_error(e0, de0, loss, 1000), kFdTol);  // every coordinate: the other chunks must stay 0

  std::vector<double> de0_skip(B * S, 0.25);  // [B, 6C]; dx null must only skip dx
  cpu::modulate_backward<double>({.x = x.data(),
                                  .scale = e0.data() + C,
                                  .dy = r.data(),
                                  .dshift = de0_skip.data(),
                                  .dscale = de0_skip.data() + C,
                                  .B = B,
                                  .L = L,
                                  .C = C,
                                  .stride = S});
  for (auto& v : de0_skip) v -= 0.25;
  EXPECT_EQ(de0_skip, de0);
}

TEST(Modulate, MatchesElementFormula) {
  const int64_t B = 3, L = 4, C = 5, S = kChunks * C;
  auto x = randn(B * L * C, 4), e0 = randn(B * S, 5);
  std::vector<double> y(B * L * C);  // [B, L, C]
  cpu::modulate_forward<double>({.x = x.data(),
                                 .shift = e0.data() + 3 * C,
                                 .scale = e0.data() + 4 * C,
                                 .y = y.data(),
                                 .B = B,
                                 .L = L,
                                 .C = C,
                                 .stride = S});
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
    cpu::gate_residual_forward<double>(
        {.x = x.data(), .y = y.data(), .gate = gate, .out = out.data(), .B = B, .L = L, .C = C, .stride = S});
    return dot(out, r);
  };
  std::vector<double> dx(B * L * C, 0.5), dy(B * L * C, -0.5), de0(B * S, 0.25);  // non-zero: accumulates
  cpu::gate_residual_backward<double>({.y = y.data(),
                                       .gate = gate,
                                       .dout = r.data(),
                                       .dx = dx.data(),
                                       .dy = dy.data(),
                                       .dgate = de0.data() + 2 * C,
                                       .B = B,
                                       .L = L,
                                       .C = C,
                                       .stride = S});
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
  cpu::gate_residual_forward<double>(
      {.x = x.data(), .y = y.data(), .out = out.data(), .B = B, .L = L, .C = C, .stride = 0});
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], x[i] + y[i]);
  std::vector<double> dy(B * L * C, 1.0);  // [B, L, C]
  cpu::gate_residual_backward<double>(
      {.y = y.data(), .dout = dout.data(), .dy = dy.data(), .B = B, .L = L, .C = C, .stride = 0});
  for (size_t i = 0; i < dy.size(); ++i) EXPECT_EQ(dy[i], 1.0 + dout[i]);
}

TEST(Modulate, FloatMatchesDouble) {
  const int64_t B = 3, L = 41, C = 131, S = kChunks * C;
  auto x = randn(B * L * C, 13), y = randn(B * L * C, 14), e0 = randn(B * S, 15), dy = randn(B * L * C, 16);
  std::vector<double> m(B * L * C), o(B * L * C), dx(B * L * C, 0.0), de0(B * S, 0.0), dyy(B * L * C, 0.0);
  cpu::modulate_forward<double>(
      {.x = x.data(), .shift = e0.data(), .scale = e0.data() + C, .y = m.data(), .B = B, .L = L, .C = C, .stride = S});
  cpu::modulate_backward<double>({.x = x.data(),
                                  .scale = e0.data() + C,
                                  .dy = dy.data(),
                                  .dx = dx.data(),
                                  .dshift = de0.data(),
                                  .dscale = de0.data() + C,
                                  .B = B,
                                  .L = L,
                                  .C = C,
                                  .stride = S});
  cpu::gate_residual_forward<double>(
      {.x = x.data(), .y = y.data(), .gate = e0.data() + 2 * C, .out = o.data(), .B = B, .L = L, .C = C, .stride = S});
  cpu::gate_residual_backward<double>({.y = y.data(),
                                       .gate = e0.data() + 2 * C,
                                       .dout = dy.data(),
                                       .dx = dx.data(),
                                       .dy = dyy.data(),
                                       .dgate = de0.data() + 2 * C,
                                       .B = B,
                                       .L = L,
                                       .C = C,
                                       .stride = S});
  auto xf = to_f32(x), yf = to_f32(y), e0f = to_f32(e0), dyf = to_f32(dy);
  std::vector<float> mf(B * L * C), of(B * L * C), dxf(B * L * C, 0.f), de0f(B * S, 0.f), dyyf(B * L * C, 0.f);
  cpu::modulate_forward<float>({.x = xf.data(),
                                .shift = e0f.data(),
                                .scale = e0f.data() + C,
                                .y = mf.data(),
                                .B = B,
                                .L = L,
                                .C = C,
                                .stride = S});
  cpu::modulate_backward<float>({.x = xf.data(),
                                 .scale = e0f.data() + C,
                                 .dy = dyf.data(),
                                 .dx = dxf.data(),
                                 .dshift = de0f.data(),
                                 .dscale = de0f.data() + C,
                                 .B = B,
                                 .L = L,
                                 .C = C,
                                 .stride = S});
  cpu::gate_residual_forward<float>({.x = xf.data(),
                                     .y = yf.data(),
                                     .gate = e0f.data() + 2 * C,
                                     .out = of.data(),
                                     .B = B,
                                     .L = L,
                                     .C = C,
                                     .stride = S});
  cpu::gate_residual_backward<float>({.y = yf.data(),
                                      .gate = e0f.data() + 2 * C,
                                      .dout = dyf.data(),
                                      .dx = dxf.data(),
                                      .dy = dyyf.data(),
                                      .dgate = de0f.data() + 2 * C,
                                      .B = B,
                                      .L = L,
                                      .C = C,
                                      .stride = S});
  EXPECT_LT(rel_l2(mf, m), kF32Tol);
  EXPECT_LT(rel_l2(of, o), kF32Tol);
  EXPECT_LT(rel_l2(dxf, dx), kF32Tol);
  EXPECT_LT(rel_l2(dyyf, dyy), kF32Tol);
  EXPECT_LT(rel_l2(de0f, de0), kF32Tol);
}

}  // namespace ms::test
