#include <omp.h>

#include "ops/window_attention.h"
#include "reference_model.h"
#include "test_util.h"

namespace ms::test {
namespace {

struct WindowCase {
  VideoAttentionDims dims;
  std::array<int64_t, 3> window;
  bool shifted;
};

// Divisible and not (padding), shifted and not, even windows, a window longer than the video on one axis.
const WindowCase kWindowCases[] = {
    {{2, 4, 4, 6, 2, 6}, {2, 2, 3}, false}, {{2, 4, 4, 6, 2, 6}, {2, 2, 3}, true},
    {{1, 5, 6, 7, 3, 4}, {2, 4, 3}, false}, {{1, 5, 6, 7, 3, 4}, {2, 4, 3}, true},
    {{1, 3, 7, 5, 2, 4}, {4, 3, 2}, true},
};

struct WindowInputs {
  WindowCase c;
  Vec q, k, v, r;
  WindowInputs(const WindowCase& cs, uint64_t seed) : c(cs) {
    const size_t n = size_t(c.dims.B * c.dims.L() * c.dims.nh * c.dims.d);
    q = randn(n, seed);
    k = randn(n, seed + 1);
    v = randn(n, seed + 2);
    r = randn(n, seed + 3);
  }
  Vec forward() const {
    Vec out(q.size()), lse(size_t(c.dims.B * c.dims.nh * c.dims.L()));
    cpu::window_attention_forward<double>(
        {{q.data(), k.data(), v.data(), out.data(), lse.data()}, c.dims, c.window, c.shifted});
    return out;
  }
  // dq, dk, dv of sum(out * r), concatenated.
  template <class T>
  Vec grads() const {
    auto cv = [](const Vec& x) { return std::vector<T>(x.begin(), x.end()); };
    const auto qt = cv(q), kt = cv(k), vt = cv(v), rt = cv(r);
    std::vector<T> out(q.size()), lse(size_t(c.dims.B * c.dims.nh * c.dims.L())), g(3 * q.size());
    T *dq = g.data(), *dk = dq + q.size(), *dv = dk + q.size();
    const WindowAttentionParams<T> p{
        {qt.data(), kt.data(), vt.data(), out.data(), lse.data(), rt.data(), dq, dk, dv}, c.dims, c.window, c.shifted};
    cpu::window_attention_forward(p);
    cpu::window_attention_backward(p);
    return Vec(g.begin(), g.end());
  }
};

}  // namespace

TEST(WindowAttention, ForwardMatchesBruteForceSwinMask) {
  uint64_t seed = 10;
  for (const auto& cs : kWindowCases) {
    WindowInputs in(cs, seed += 10);
    const auto& d = cs.dims;
    Vec ref = ref_window_attention(in.q, in.k, in.v, d.B, d.T, d.H, d.W, d.nh, d.d, cs.window, cs.shifted);
    EXPECT_LT(rel_l2(in.forward(), ref), 1e-12) << "case T=" << d.T << " shifted=" << cs.shifted;
  }
}

// The shift changes the result (it is not silently ignored), and a window covering the video is dense attention.
TEST(WindowAttention, ShiftMattersAndFullWindowIsDense) {
  WindowInputs a(kWindowCases[0], 50), b(kWindowCases[1], 50);
  EXPECT_GT(rel_l2(a.forward(), b.forward()), 1e-3);
  WindowInputs full({{1, 3, 4, 5, 2, 6}, {3, 5, 5}, true}, 60);
  const auto& d = full.c.dims;
  EXPECT_LT(rel_l2(full.forward(), ref_attention(full.q, full.k, full.v, d.B, d.L(), d.L(), d.nh, d.d)), 1e-12);
}

TEST(WindowAttention, GradientsMatchFiniteDifferences) {
  uint64_t seed = 100;
  for (const auto& cs : {kWindowCases[1], kWindowCases[3], kWindowCases[4]}) {
    WindowInputs in(cs, seed += 10);
    const size_t n = in.q.size();
    const Vec g = in.grads<double>();
    auto loss = [&] { return dot(in.forward(), in.r); };
    EXPECT_LT(fd_error(in.q, Vec(g.begin(), g.begin() + n), loss), kFdTol);
    EXPECT_LT(fd_error(in.k, Vec(g.begin() + n, g.begin() + 2 * n), loss), kFdTol);
    EXPECT_LT(fd_error(in.v, Vec(g.begin() + 2 * n, g.end()), loss), kFdTol);
  }
}

// Large enough for the kernel to use threads (see min_parallel_for_work).
TEST(WindowAttention, FloatMatchesDoubleAndIsDeterministic) {
  WindowInputs in({{2, 6, 8, 9, 4, 8}, {2, 4, 3}, true}, 200);
  const Vec d = in.grads<double>(), f = in.grads<float>();
  EXPECT_LT(rel_l2(f, d), kF32Tol);
  const int keep = omp_get_max_threads();
  omp_set_num_threads(1);
  const Vec f1 = in.grads<float>();
  omp_set_num_threads(3);
  const Vec f3 = in.grads<float>();
  omp_set_num_threads(keep);
  EXPECT_EQ(f1, f);
  EXPECT_EQ(f3, f);
}

}  // namespace ms::test
