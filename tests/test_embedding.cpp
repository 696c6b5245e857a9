#include "ops/embedding.h"

#include "test_util.h"

namespace ms::test {

TEST(PadContext, GradientsMatchFiniteDifferences) {
  const int64_t B = 2, Lc = 3, Lt = 7, C = 5;
  auto ctx = randn(B * Lc * C, 1), r = randn(B * Lt * C, 2);
  auto loss = [&] {
    std::vector<double> padded(B * Lt * C);  // [B, Lt, C]
    cpu::pad_context_forward<double>(
        {.context = ctx.data(), .padded = padded.data(), .B = B, .Lc = Lc, .Lt = Lt, .C = C});
    return dot(padded, r);
  };
  std::vector<double> dctx(B * Lc * C, 7.0);  // [B, Lc, C]; overwritten
  cpu::pad_context_backward<double>({.dpadded = r.data(), .dcontext = dctx.data(), .B = B, .Lc = Lc, .Lt = Lt, .C = C});
  EXPECT_LT(fd_error(ctx, dctx, loss), kFdTol);
}

TEST(PadContext, CopiesRowsThenZeros) {
  const int64_t B = 3, Lc = 2, Lt = 5, C = 3;
  auto ctx = randn(B * Lc * C, 3);
  std::vector<double> padded(B * Lt * C, 9.0);  // [B, Lt, C]; overwritten
  cpu::pad_context_forward<double>(
      {.context = ctx.data(), .padded = padded.data(), .B = B, .Lc = Lc, .Lt = Lt, .C = C});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < Lt; ++l)
      for (int64_t c = 0; c < C; ++c)
        EXPECT_EQ(padded[(b * Lt + l) * C + c], l < Lc ? ctx[(b * Lc + l) * C + c] : 0.0);
}

TEST(Sinusoidal, FloatMatchesDouble) {
  const int64_t B = 5, dim = 258;
  std::vector<double> t(B);  // [B]; float-representable so both runs see the same t
  for (int64_t b = 0; b < B; ++b) t[b] = double(float(1000.0 * (b + 0.37) / B));
  std::vector<double> out(B * dim);
  cpu::sinusoidal_embedding<double>({.t = t.data(), .out = out.data(), .B = B, .dim = dim});
  auto tf = to_f32(t);
  std::vector<float> outf(B * dim);
  cpu::sinusoidal_embedding<float>({.t = tf.data(), .out = outf.data(), .B = B, .dim = dim});
  EXPECT_LT(rel_l2(outf, out), kF32Tol);
}

TEST(Sinusoidal, KnownValues) {
  const int64_t dim = 8, half = 4;
  const std::vector<double> t = {0.0, 500.0};
  std::vector<double> out(2 * dim);  // [2, dim]
  cpu::sinusoidal_embedding<double>({.t = t.data(), .out = out.data(), .B = 2, .dim = dim});
  for (int64_t i = 0; i < half; ++i) {  // t = 0: cos 1, sin 0
    EXPECT_EQ(out[i], 1.0);
    EXPECT_EQ(out[half + i], 0.0);
  }
  // t = 500: frequencies 10000^(-i/4) = 1, 0.1, 0.01, 0.001.
  const double freq[4] = {1.0, 0.1, 0.01, 0.001};
  for (int64_t i = 0; i < half; ++i) {
    EXPECT_NEAR(out[dim + i], std::cos(500.0 * freq[i]), 1e-12);
    EXPECT_NEAR(out[dim + half + i], std::sin(500.0 * freq[i]), 1e-12);
  }
}

}  // namespace ms::test
