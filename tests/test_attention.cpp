#include <cmath>

#include "ops/attention.h"
#include "test_util.h"

namespace ms::test {
namespace {

// Plain reference: materialises the whole score matrix per (b, head).
std::vector<double> naive_attention(const std::vector<double>& q, const std::vector<double>& k,
                                    const std::vector<double>& v, const AttentionDims& a) {
  std::vector<double> out(q.size());
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t n = 0; n < a.nh; ++n)
      for (int64_t i = 0; i < a.Lq; ++i) {
        std::vector<double> s(size_t(a.Lk));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < a.Lk; ++j) {
          double dotp = 0;
          for (int64_t c = 0; c < a.d; ++c)
            dotp += q[((b * a.Lq + i) * a.nh + n) * a.d + c] * k[((b * a.Lk + j) * a.nh + n) * a.d + c];
          s[j] = dotp / std::sqrt(double(a.d));
          mx = std::max(mx, s[j]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t c = 0; c < a.d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < a.Lk; ++j) o += s[j] / sum * v[((b * a.Lk + j) * a.nh + n) * a.d + c];
          out[((b * a.Lq + i) * a.nh + n) * a.d + c] = o;
        }
      }
  return out;
}

}  // namespace

// Lq and Lk span several tiles (256 / 256) with ragged ends.
TEST(Attention, ForwardMatchesNaiveReference) {
  AttentionDims a{2, 301, 587, 3, 5};
  auto q = randn(a.B * a.Lq * a.nh * a.d, 1), k = randn(a.B * a.Lk * a.nh * a.d, 2),
       v = randn(a.B * a.Lk * a.nh * a.d, 3);
  std::vector<double> out(q.size()), lse(a.B * a.nh * a.Lq);
  cpu::attention_forward<double>({{q.data(), k.data(), v.data(), out.data(), lse.data()}, a});
  EXPECT_LT(rel_l2(out, naive_attention(q, k, v, a)), 1e-12);
  auto qf = to_f32(q), kf = to_f32(k), vf = to_f32(v);
  std::vector<float> outf(q.size()), lsef(lse.size());
  cpu::attention_forward<float>({{qf.data(), kf.data(), vf.data(), outf.data(), lsef.data()}, a});
  EXPECT_LT(rel_l2(outf, out), kF32Tol);
  EXPECT_LT(rel_l2(lsef, lse), kF32Tol);
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  AttentionDims a{2, 270, 531, 2, 3};  // crosses tile borders on both axes
  auto q = randn(a.B * a.Lq * a.nh * a.d, 4), k = randn(a.B * a.Lk * a.nh * a.d, 5),
       v = randn(a.B * a.Lk * a.nh * a.d, 6), r = randn(a.B * a.Lq * a.nh * a.d, 7);
  std::vector<double> out(q.size()), lse(a.B * a.nh * a.Lq);
  auto loss = [&] {
    cpu::attention_forward<double>({{q.data(), k.data(), v.data(), out.data(), lse.data()}, a});
    return dot(out, r);
  };
  loss();
  std::vector<double> dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  cpu::attention_backward<double>(
      {{q.data(), k.data(), v.data(), out.data(), lse.data(), r.data(), dq.data(), dk.data(), dv.data()}, a});
  EXPECT_LT(fd_error(q, dq, loss), kFdTol);
  EXPECT_LT(fd_error(k, dk, loss), kFdTol);
  EXPECT_LT(fd_error(v, dv, loss), kFdTol);
}

}  // namespace ms::test
