#include "ops/patchify.h"
#include "test_util.h"

namespace ms::test {

// Odd extents everywhere; B=2, C=3, (F, H, W) = (4, 6, 9) with patch (2, 3, 3): (f, h, w) = (2, 2, 3).
const PatchDims kPatchDims{2, 3, 4, 6, 9, 2, 3, 3};

static int64_t video_size(const PatchDims& d) { return d.B * d.C * d.F * d.H * d.W; }

TEST(Patchify, GradientsMatchFiniteDifferences) {
  const auto& d = kPatchDims;
  const int64_t nv = video_size(d), nt = d.B * d.tokens() * d.patch();
  auto lat = randn(nv, 1), r = randn(nt, 2);
  auto loss = [&] {
    std::vector<double> p(nt);  // [B, L, C*pt*ph*pw]
    cpu::patchify_forward<double>({.latents = lat.data(), .patches = p.data(), .d = d});
    return dot(p, r);
  };
  std::vector<double> dlat(nv, 7.0);  // [B, C, F, H, W]; overwritten
  cpu::patchify_backward<double>({.dpatches = r.data(), .dlatents = dlat.data(), .d = d});
  EXPECT_LT(fd_error(lat, dlat, loss, 200), kFdTol);

  auto tok = randn(nt, 3), rv = randn(nv, 4);
  auto loss_un = [&] {
    std::vector<double> v(nv);  // [B, C, F, H, W]
    cpu::unpatchify_forward<double>({.tokens = tok.data(), .video = v.data(), .d = d});
    return dot(v, rv);
  };
  std::vector<double> dtok(nt, 7.0);  // [B, L, pt*ph*pw*C]; overwritten
  cpu::unpatchify_backward<double>({.dvideo = rv.data(), .dtokens = dtok.data(), .d = d});
  EXPECT_LT(fd_error(tok, dtok, loss_un, 200), kFdTol);
}

TEST(Patchify, FloatMatchesDouble) {
  const PatchDims d{3, 5, 3, 10, 14, 1, 2, 2};
  const int64_t nv = video_size(d);
  auto lat = randn(nv, 5);
  std::vector<double> p(nv), v(nv);
  cpu::patchify_forward<double>({.latents = lat.data(), .patches = p.data(), .d = d});
  cpu::unpatchify_forward<double>({.tokens = p.data(), .video = v.data(), .d = d});
  auto latf = to_f32(lat);
  std::vector<float> pf(nv), vf(nv);
  cpu::patchify_forward<float>({.latents = latf.data(), .patches = pf.data(), .d = d});
  cpu::unpatchify_forward<float>({.tokens = pf.data(), .video = vf.data(), .d = d});
  EXPECT_LT(rel_l2(pf, p), kF32Tol);
  EXPECT_LT(rel_l2(vf, v), kF32Tol);
}

TEST(Patchify, MatchesIndexFormulas) {
  const auto& d = kPatchDims;
  const int64_t nv = video_size(d), f_ = d.f(), h_ = d.h(), w_ = d.w(), L = d.tokens(), P = d.patch();
  auto lat = randn(nv, 6), tok = randn(nv, 7);
  std::vector<double> p(nv), v(nv);
  cpu::patchify_forward<double>({.latents = lat.data(), .patches = p.data(), .d = d});
  cpu::unpatchify_forward<double>({.tokens = tok.data(), .video = v.data(), .d = d});
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t f = 0; f < f_; ++f)
        for (int64_t h = 0; h < h_; ++h)
          for (int64_t w = 0; w < w_; ++w)
            for (int64_t kt = 0; kt < d.pt; ++kt)
              for (int64_t kh = 0; kh < d.ph; ++kh)
                for (int64_t kw = 0; kw < d.pw; ++kw) {
                  const int64_t t = f * d.pt + kt, y = h * d.ph + kh, x = w * d.pw + kw;
                  const int64_t vi = (((b * d.C + c) * d.F + t) * d.H + y) * d.W + x;
                  const int64_t row = (b * L + (f * h_ + h) * w_ + w) * P;
                  EXPECT_EQ(p[row + ((c * d.pt + kt) * d.ph + kh) * d.pw + kw], lat[vi]);  // conv weight order
                  EXPECT_EQ(v[vi], tok[row + ((kt * d.ph + kh) * d.pw + kw) * d.C + c]);   // Wan's unpatchify
                }
}

TEST(Patchify, InverseReordersRoundTrip) {
  const auto& d = kPatchDims;
  const int64_t nv = video_size(d);
  auto lat = randn(nv, 8);
  std::vector<double> p(nv), back(nv), v(nv), tok(nv);
  cpu::patchify_forward<double>({.latents = lat.data(), .patches = p.data(), .d = d});
  cpu::patchify_backward<double>({.dpatches = p.data(), .dlatents = back.data(), .d = d});
  EXPECT_EQ(back, lat);
  cpu::unpatchify_backward<double>({.dvideo = lat.data(), .dtokens = tok.data(), .d = d});
  cpu::unpatchify_forward<double>({.tokens = tok.data(), .video = v.data(), .d = d});
  EXPECT_EQ(v, lat);
}

}  // namespace ms::test
