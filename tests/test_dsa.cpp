#include <omp.h>

#include <cmath>
#include <limits>

#include "ops/attention.h"
#include "ops/dsa.h"
#include "reference_model.h"
#include "test_util.h"

namespace ms::test {
namespace {

struct DsaCase {
  VideoAttentionDims dims;
  DsaArgs args;
};

// Odd extents; an even window; a window longer than the video on one axis (invalid slots); G < nh throughout;
// P = 512 slots so that the backward's position-gradient scratch takes several passes (42 of the 60 queries each).
const DsaCase kDsaCases[] = {
    {{2, 3, 4, 5, 4, 6}, {{3, 3, 3}, 2}},
    {{1, 2, 5, 4, 2, 4}, {{2, 4, 2}, 1}},
    {{1, 2, 3, 6, 2, 4}, {{4, 3, 3}, 1}},
    {{2, 3, 4, 5, 8, 2}, {{8, 8, 8}, 2}},
};

// Inputs of one case: q, k, v [B, T, H, W, nh, d], offsets [B, T, H, W, G, P, 3], a loss weight r like out.
struct DsaInputs {
  DsaCase c;
  Vec q, k, v, off, r;
  explicit DsaInputs(const DsaCase& cs, uint64_t seed) : c(cs) {
    const size_t n = size_t(c.dims.B * c.dims.L() * c.dims.nh * c.dims.d);
    q = randn(n, seed);
    k = randn(n, seed + 1);
    v = randn(n, seed + 2);
    r = randn(n, seed + 3);
    off.resize(size_t(c.dims.B * c.dims.L() * c.args.groups * c.args.P() * 3));
  }
  // Offsets at least `margin` from any integer (so positions s + j + offset are never integers, at the borders
  // neither), up to 3 tokens, so some samples fall past the borders and are clamped.
  void off_away_from_integers(uint64_t seed, double margin = 0.15) {
    Rng rng(seed);
    for (auto& x : off) x = double(rng.below(6) - 3) + rng.uniform(margin, 1 - margin);
  }
  size_t lse_size() const { return size_t(c.dims.B * c.dims.nh * c.dims.L()); }
  Vec forward(const double* offsets) const {
    Vec out(q.size()), lse(lse_size());
    cpu::dsa_forward<double>(
        {{q.data(), k.data(), v.data(), out.data(), lse.data()}, offsets, nullptr, c.dims, c.args});
    return out;
  }
  Vec reference() const {
    const auto& d = c.dims;
    return ref_dsa(q, k, v, off, d.B, d.T, d.H, d.W, d.nh, d.d, c.args.window, c.args.groups);
  }
};

// Gradients of sum(out * r) from dsa_backward.
struct DsaGrads {
  Vec dq, dk, dv, doff;
};

template <class T>
DsaGrads run_backward(const DsaInputs& in, bool with_offsets) {
  auto cv = [](const Vec& x) { return std::vector<T>(x.begin(), x.end()); };
  const auto q = cv(in.q), k = cv(in.k), v = cv(in.v), off = cv(in.off), r = cv(in.r);
  std::vector<T> out(q.size()), lse(in.lse_size()), dq(q.size()), dk(q.size()), dv(q.size()), doff(off.size());
  const T* o = with_offsets ? off.data() : nullptr;
  const DsaParams<T> p{
      {q.data(), k.data(), v.data(), out.data(), lse.data(), r.data(), dq.data(), dk.data(), dv.data()},
      o,
      with_offsets ? doff.data() : nullptr,
      in.c.dims,
      in.c.args};
  cpu::dsa_forward(p);
  cpu::dsa_backward(p);
  auto back = [](const std::vector<T>& x) { return Vec(x.begin(), x.end()); };
  return {back(dq), back(dk), back(dv), back(doff)};
}

}  // namespace

TEST(Dsa, ForwardMatchesTrilinearReference) {
  uint64_t seed = 100;
  for (const auto& cs : kDsaCases) {
    DsaInputs in(cs, seed += 10);
    in.off = randn(in.off.size(), seed + 5, 1.5);  // arbitrary offsets, some far past the borders
    EXPECT_LT(rel_l2(in.forward(in.off.data()), in.reference()), 1e-12) << "window " << cs.args.window[0];
  }
}

namespace {

// The float64 backward against central differences of <forward, r> for q, k, v and the offsets; returns it.
DsaGrads expect_gradients_match_finite_differences(DsaInputs& in, const std::string& what = "") {
  auto loss = [&] { return dot(in.forward(in.off.data()), in.r); };
  DsaGrads g = run_backward<double>(in, true);
  EXPECT_LT(fd_error(in.q, g.dq, loss), kFdTol) << what;
  EXPECT_LT(fd_error(in.k, g.dk, loss), kFdTol) << what;
  EXPECT_LT(fd_error(in.v, g.dv, loss), kFdTol) << what;
  EXPECT_LT(fd_error(in.off, g.doff, loss, 96), kFdTol) << what;
  return g;
}

}  // namespace

TEST(Dsa, GradientsMatchFiniteDifferences) {
  uint64_t seed = 200;
  for (const auto& cs : kDsaCases) {
    DsaInputs in(cs, seed += 10);
    in.off_away_from_integers(seed + 5);
    expect_gradients_match_finite_differences(in);
  }
}

// The head dims the kernels compile as constants (32, 64, 128) take their own code path: the same checks there.
TEST(Dsa, SpecialisedHeadDimsMatchReferenceAndFiniteDifferences) {
  uint64_t seed = 250;
  for (int64_t d : {32, 64, 128}) {
    DsaInputs in({{1, 2, 3, 5, 2, d}, {{3, 3, 3}, 1}}, seed += 10);
    in.off = randn(in.off.size(), seed + 5, 1.5);
    EXPECT_LT(rel_l2(in.forward(in.off.data()), in.reference()), 1e-12) << "head dim " << d;
    in.off_away_from_integers(seed + 6);
    const DsaGrads g = expect_gradients_match_finite_differences(in, "head dim " + std::to_string(d)),
                   f = run_backward<float>(in, true);
    EXPECT_LT(rel_l2(f.dq, g.dq), kF32Tol) << "head dim " << d;
    EXPECT_LT(rel_l2(f.doff, g.doff), kF32Tol) << "head dim " << d;
  }
}

// t offsets far below 0, h offsets far past the end: clamped everywhere. w offsets 0: clamped exactly at the
// borders (positions 0 and W - 1 count as clamped, as in grid_sample), live inside.
TEST(Dsa, ClampedCoordinatesGetZeroPositionGradient) {
  DsaInputs in(kDsaCases[0], 300);
  const auto& d = in.c.dims;
  const int64_t G = in.c.args.groups, P = in.c.args.P();
  for (size_t i = 0; i < in.off.size(); i += 3) {
    in.off[i] = -5.3;
    in.off[i + 1] = 7.1;
    in.off[i + 2] = 0;
  }
  const DsaGrads g = run_backward<double>(in, true);
  int64_t live = 0;
  for (int64_t row = 0; row < d.B * d.L(); ++row)
    for (int64_t p = 0; p < G * P; ++p) {
      const double* gp = g.doff.data() + (row * G * P + p) * 3;  // [3]
      EXPECT_EQ(gp[0], 0.0);
      EXPECT_EQ(gp[1], 0.0);
      const int64_t w = row % d.W, start = std::clamp<int64_t>(w - 1, 0, d.W - 3), pos = start + (p % P) % 3;
      if (pos == 0 || pos == d.W - 1) {
        EXPECT_EQ(gp[2], 0.0) << "w position " << pos;
      }
      live += gp[2] != 0.0;
    }
  EXPECT_GT(live, 0);
}

// With the window covering the video every query sees every token once, in grid order: dense attention.
TEST(Dsa, FixedWithFullWindowEqualsDense) {
  for (const std::array<int64_t, 3>& win : {std::array<int64_t, 3>{3, 4, 5}, std::array<int64_t, 3>{4, 6, 5}}) {
    DsaInputs in({{2, 3, 4, 5, 2, 6}, {win, 2}}, 400);
    const auto& d = in.c.dims;
    const AttentionDims ad{d.B, d.L(), d.L(), d.nh, d.d};
    Vec out(in.q.size()), lse(in.lse_size()), dq(in.q.size()), dk(dq.size()), dv(dq.size());
    const AttentionParams<double> p{
        {in.q.data(), in.k.data(), in.v.data(), out.data(), lse.data(), in.r.data(), dq.data(), dk.data(), dv.data()},
        ad};
    cpu::attention_forward(p);
    cpu::attention_backward(p);
    EXPECT_LT(rel_l2(in.forward(nullptr), out), 1e-13);
    const DsaGrads g = run_backward<double>(in, false);
    EXPECT_LT(rel_l2(g.dq, dq), 1e-12);
    EXPECT_LT(rel_l2(g.dk, dk), 1e-12);
    EXPECT_LT(rel_l2(g.dv, dv), 1e-12);
  }
}

TEST(Dsa, ZeroOffsetsEqualFixed) {
  for (const auto& cs : kDsaCases) {
    DsaInputs in(cs, 500);  // offsets all zero
    EXPECT_EQ(in.forward(in.off.data()), in.forward(nullptr));
    const DsaGrads a = run_backward<double>(in, true), b = run_backward<double>(in, false);
    EXPECT_EQ(a.dq, b.dq);
    EXPECT_EQ(a.dk, b.dk);
    EXPECT_EQ(a.dv, b.dv);
  }
}

TEST(Dsa, FloatMatchesDouble) {
  DsaInputs in(kDsaCases[0], 600);
  in.off_away_from_integers(605);
  const DsaGrads d = run_backward<double>(in, true), f = run_backward<float>(in, true);
  EXPECT_LT(rel_l2(f.dq, d.dq), kF32Tol);
  EXPECT_LT(rel_l2(f.dk, d.dk), kF32Tol);
  EXPECT_LT(rel_l2(f.dv, d.dv), kF32Tol);
  EXPECT_LT(rel_l2(f.doff, d.doff), kF32Tol);
}

// Bitwise identical run to run and for any thread count (large enough for threads: see min_parallel_for_work).
TEST(Dsa, DeterministicAcrossRunsAndThreadCounts) {
  DsaInputs in({{2, 4, 5, 6, 4, 8}, {{3, 3, 3}, 2}}, 700);
  in.off = randn(in.off.size(), 705, 1.5);
  const int keep = omp_get_max_threads();
  const DsaGrads a = run_backward<float>(in, true), b = run_backward<float>(in, true);
  omp_set_num_threads(1);
  const DsaGrads c = run_backward<float>(in, true);
  omp_set_num_threads(3);
  const DsaGrads e = run_backward<float>(in, true);
  omp_set_num_threads(keep);
  for (const DsaGrads* x : {&b, &c, &e}) {
    EXPECT_EQ(x->dq, a.dq);
    EXPECT_EQ(x->dk, a.dk);
    EXPECT_EQ(x->dv, a.dv);
    EXPECT_EQ(x->doff, a.doff);
  }
}

// A NaN offset poisons exactly its own (query, group): that query's outputs for the group's heads, its dq and its
// offset gradients turn NaN; every other query's output, dq and offset gradients are those of the run without it.
// The sample reads corner 0 (never out of bounds, which the sanitizer builds check).
TEST(Dsa, NanOffsetPoisonsOnlyItsQueryAndGroup) {
  const DsaCase& cs = kDsaCases[0];
  const auto& d = cs.dims;
  const int64_t G = cs.args.groups, P = cs.args.P(), hpg = d.nh / G, bad_b = 1, bad_l = 7, bad_g = 1;
  DsaInputs clean(cs, 980), poisoned(cs, 980);
  clean.off_away_from_integers(985);
  poisoned.off = clean.off;
  poisoned.off[size_t((((bad_b * d.L() + bad_l) * G + bad_g) * P + 4) * 3 + 2)] = std::nan("");
  const Vec a = clean.forward(clean.off.data()), b = poisoned.forward(poisoned.off.data());
  const DsaGrads ga = run_backward<double>(clean, true), gb = run_backward<double>(poisoned, true);
  for (int64_t bl = 0; bl < d.B * d.L(); ++bl)
    for (int64_t n = 0; n < d.nh; ++n) {
      const bool bad = bl == bad_b * d.L() + bad_l && n / hpg == bad_g;
      for (int64_t e = 0; e < d.d; ++e) {
        const size_t i = size_t((bl * d.nh + n) * d.d + e);
        if (bad) {
          EXPECT_TRUE(std::isnan(b[i]) && std::isnan(gb.dq[i])) << "query " << bl << " head " << n;
        } else {
          EXPECT_EQ(b[i], a[i]) << "query " << bl << " head " << n;
          EXPECT_EQ(gb.dq[i], ga.dq[i]) << "query " << bl << " head " << n;
        }
      }
    }
  for (int64_t bl = 0; bl < d.B * d.L(); ++bl)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t e = 0; e < P * 3; ++e) {
        const size_t i = size_t((bl * G + g) * P * 3 + e);
        if (bl == bad_b * d.L() + bad_l && g == bad_g)
          EXPECT_TRUE(std::isnan(gb.doff[i])) << "slot entry " << e;
        else
          EXPECT_EQ(gb.doff[i], ga.doff[i]) << "query " << bl << " group " << g;
      }
}

// The backward numbers each query's distinct corner tokens over the box they span, one 64-bit word per 64 tokens of
// a box row: w offsets of 30 to 45 tokens either way spread the corners over more than 64 columns (and clamp some
// at the borders), and two heads share each group's samples.
TEST(Dsa, CornersSpreadWiderThan64ColumnsMatchReferenceAndFiniteDifferences) {
  DsaInputs in({{1, 2, 3, 71, 4, 4}, {{2, 3, 3}, 2}}, 950);
  in.off_away_from_integers(955);
  Rng rng(956);
  for (size_t i = 2; i < in.off.size(); i += 3)
    in.off[i] = (rng.below(2) ? 1.0 : -1.0) * double(30 + rng.below(16)) + rng.uniform(0.15, 0.85);
  EXPECT_LT(rel_l2(in.forward(in.off.data()), in.reference()), 1e-12);
  expect_gradients_match_finite_differences(in);
}

// Batch 1, so that the backward's second phase (dk, dv) splits the grid rows over the threads, and a window of
// 8x8x8 slots, so that its scratch holds 16 queries per thread and it takes many passes: bitwise the same results
// for 1 to 4 threads and run to run.
TEST(Dsa, RowSplitAndPassesGiveIdenticalResultsForAnyThreadCount) {
  DsaInputs in({{1, 6, 8, 9, 4, 8}, {{8, 8, 8}, 2}}, 960);
  in.off = randn(in.off.size(), 965, 1.5);
  const int keep = omp_get_max_threads();
  omp_set_num_threads(1);
  const DsaGrads a = run_backward<float>(in, true);
  for (int threads : {1, 2, 3, 4}) {
    omp_set_num_threads(threads);
    const DsaGrads x = run_backward<float>(in, true);
    EXPECT_EQ(x.dq, a.dq) << threads << " threads";
    EXPECT_EQ(x.dk, a.dk) << threads << " threads";
    EXPECT_EQ(x.dv, a.dv) << threads << " threads";
    EXPECT_EQ(x.doff, a.doff) << threads << " threads";
  }
  omp_set_num_threads(keep);
}

TEST(DsaOffsets, GradientMatchesFiniteDifferences) {
  const int64_t N = 5, M = 4;
  const std::array<double, 3> range{1.0, 2.0, 0.5};
  Vec raw = randn(size_t(N * M * 3), 800), r = randn(raw.size(), 801), off(raw.size());
  Vec draw(raw.size());
  const DsaOffsetsParams<double> p{raw.data(), off.data(), r.data(), draw.data(), range, N, M};
  auto loss = [&] {
    cpu::dsa_offsets_forward(p);
    return dot(off, r);
  };
  loss();
  EXPECT_NEAR(off[2], 0.5 * std::tanh(raw[2]), 1e-15);
  cpu::dsa_offsets_backward(p);
  EXPECT_LT(fd_error(raw, draw, loss), kFdTol);
}

// Every element against long-double std::tanh over the whole range where tanh bends and saturates, on a length that
// is not a multiple of any vector width and spans several parallel chunks: range * tanh(x), and
// doffsets * range * (1 - tanh(x)^2), the latter exact in long double where tanh saturates in T. Errors are relative,
// and absolute below 64 times T's smallest normal number (1 - tanh^2 underflows from |x| = 44 in float).
template <class T>
void check_offsets_closed_form(double tol) {
  const int64_t N = 37, M = 81, n = N * M * 3;  // M = 3 groups x 27 slots; n = 8991, odd: a partial last vector
  const std::array<double, 3> range{1.0, 2.0, 0.5};
  const Vec r = randn(static_cast<size_t>(n), 802), g = randn(static_cast<size_t>(n), 803);
  const size_t len = static_cast<size_t>(n);
  std::vector<T> raw(len), dout(len), off(len), draw(len);
  for (int64_t i = 0; i < n; ++i) {
    raw[size_t(i)] = T(-50.0 + 100.0 * double(i) / double(n - 1) + 0.01 * r[size_t(i)]);
    dout[size_t(i)] = T(g[size_t(i)]);
  }
  const DsaOffsetsParams<T> p{raw.data(), off.data(), dout.data(), draw.data(), range, N, M};
  cpu::dsa_offsets_forward(p);
  cpu::dsa_offsets_backward(p);
  const long double tiny = 64 * std::numeric_limits<T>::min();
  for (int64_t i = 0; i < n; ++i) {
    const long double x = raw[size_t(i)], t = std::tanh(x), e = std::exp(-2 * std::fabs(x));
    const long double ref_off = range[size_t(i % 3)] * t,
                      ref_draw = dout[size_t(i)] * range[size_t(i % 3)] * 4 * e / ((1 + e) * (1 + e));
    EXPECT_LE(std::fabs(off[size_t(i)] - ref_off), tol * std::fabs(ref_off) + tiny) << "x = " << x;
    EXPECT_LE(std::fabs(draw[size_t(i)] - ref_draw), tol * std::fabs(ref_draw) + tiny) << "x = " << x;
  }
}

TEST(DsaOffsets, MatchClosedFormAcrossTheRange) {
  check_offsets_closed_form<float>(1e-6);    // 8 ulp: Tanh (4 ulp) or exp (1 ulp) and a few products
  check_offsets_closed_form<double>(2e-15);  // the same in ulp of double
}

TEST(DsaOffsets, NanPropagates) {
  const std::array<double, 3> range{1.0, 2.0, 0.5};
  for (int64_t N : {1, 7}) {  // the last partial vector alone, and after full ones
    Vec raw(size_t(N * 3), 0.3), dout(raw.size(), 1.0), off(raw.size()), draw(raw.size());
    raw.back() = std::numeric_limits<double>::quiet_NaN();
    const DsaOffsetsParams<double> p{raw.data(), off.data(), dout.data(), draw.data(), range, N, 1};
    cpu::dsa_offsets_forward(p);
    cpu::dsa_offsets_backward(p);
    EXPECT_TRUE(std::isnan(off.back()));
    EXPECT_TRUE(std::isnan(draw.back()));
    EXPECT_FALSE(std::isnan(off.front()));
  }
}

}  // namespace ms::test
