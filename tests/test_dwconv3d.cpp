#include "ops/dwconv3d.h"
#include "test_util.h"

namespace ms::test {
namespace {

// Direct depthwise convolution with explicit zero padding, x [B, T, H, W, C], w [C, 3, 3, 3].
std::vector<double> naive_dwconv(const std::vector<double>& x, const std::vector<double>& w,
                                 const std::vector<double>& b, int64_t B, int64_t Tn, int64_t H, int64_t W, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t s = 0; s < B; ++s)
    for (int64_t t = 0; t < Tn; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t u = 0; u < W; ++u)
          for (int64_t c = 0; c < C; ++c) {
            double acc = b[c];
            for (int64_t a = 0; a < 3; ++a)
              for (int64_t e = 0; e < 3; ++e)
                for (int64_t f = 0; f < 3; ++f) {
                  const int64_t tt = t + a - 1, hh = h + e - 1, uu = u + f - 1;
                  const bool in = tt >= 0 && tt < Tn && hh >= 0 && hh < H && uu >= 0 && uu < W;
                  if (in) acc += w[c * 27 + (a * 3 + e) * 3 + f] * x[(((s * Tn + tt) * H + hh) * W + uu) * C + c];
                }
            y[(((s * Tn + t) * H + h) * W + u) * C + c] = acc;
          }
  return y;
}

}  // namespace

// C = 19 spans two channel blocks (16 + 3); extents of 1 leave every tap but the centre out on that axis.
TEST(DwConv3d, ForwardMatchesNaiveAndGradientsMatchFiniteDifferences) {
  for (auto [B, Tn, H, W, C] : {std::array<int64_t, 5>{2, 3, 4, 5, 19}, std::array<int64_t, 5>{1, 1, 3, 2, 4}}) {
    auto x = randn(size_t(B * Tn * H * W * C), 1), w = randn(size_t(C * 27), 2), b = randn(size_t(C), 3);
    auto r = randn(x.size(), 4);
    std::vector<double> y(x.size());
    auto loss = [&] {
      cpu::dwconv3d_forward<double>(
          {.x = x.data(), .w = w.data(), .b = b.data(), .y = y.data(), .B = B, .Tn = Tn, .H = H, .W = W, .C = C});
      return dot(y, r);
    };
    loss();
    EXPECT_LT(rel_l2(y, naive_dwconv(x, w, b, B, Tn, H, W, C)), 1e-14);
    std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0), db(b.size(), 0.0);
    cpu::dwconv3d_backward<double>({.x = x.data(),
                                    .w = w.data(),
                                    .dy = r.data(),
                                    .dx = dx.data(),
                                    .dw = dw.data(),
                                    .db = db.data(),
                                    .B = B,
                                    .Tn = Tn,
                                    .H = H,
                                    .W = W,
                                    .C = C});
    EXPECT_LT(fd_error(x, dx, loss), kFdTol);
    EXPECT_LT(fd_error(w, dw, loss), kFdTol);
    EXPECT_LT(fd_error(b, db, loss), kFdTol);
    auto xf = to_f32(x), wf = to_f32(w), bf = to_f32(b);
    std::vector<float> yf(x.size());
    cpu::dwconv3d_forward<float>(
        {.x = xf.data(), .w = wf.data(), .b = bf.data(), .y = yf.data(), .B = B, .Tn = Tn, .H = H, .W = W, .C = C});
    EXPECT_LT(rel_l2(yf, y), kF32Tol);
  }
}

}  // namespace ms::test
