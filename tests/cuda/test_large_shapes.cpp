// Every attention type at 32768 tokens with Wan2.1-14B's 40 heads of 128 (tools/device-check.sh): the grid sizes,
// index arithmetic and launch limits that the small tests cannot reach. Outputs and gradients must be finite
// everywhere, and sampled rows match float64:
// - dense and window attention row by row: out, lse and dq of sampled queries written out in float64 loops; dk and
//   dv of sampled keys summed over every query through the forward's own lse and out (themselves checked on the
//   sampled queries), since a float64 softmax of every query is hours of CPU time;
// - dsa and dsa_fixed on whole heads, through the CPU kernels in float64 (themselves checked against finite
//   differences): with one offset group per head the heads are independent, so two heads sliced out are a problem of
//   their own.
// The same checks also run on a small grid, which the emulator (tools/cuda-emu) runs; the 32k cases need a GPU
// (hours on the emulator). Inputs are a counter hash in parallel (randn would take minutes at these sizes).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/attention.h"
#include "backend/cuda/dsa.h"
#include "backend/cuda/window_attention.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "cuda_util.h"
#include "model_reference.h"
#include "ops/dsa.h"

namespace ms::test {
namespace {

constexpr std::array<int64_t, 3> kLargeGrid{8, 64, 64};  // 32768 tokens
constexpr int64_t kLargeHeads = 40, kLargeHeadDim = 128;
constexpr int kSampledRows = 192;

// n bf16 values uniform with standard deviation `scale`, element i a hash of (seed, i).
std::vector<uint16_t> hashed_bf16(size_t n, uint64_t seed, double scale) {
  std::vector<uint16_t> r(n);
  const int64_t chunk = 1 << 16;
  parallel_for((int64_t(n) + chunk - 1) / chunk, [&](int64_t c) {
    for (size_t i = size_t(c * chunk); i < std::min(n, size_t((c + 1) * chunk)); ++i) {
      Rng rng(seed * 0x9e3779b97f4a7c15ull + i);
      r[i] = f32_to_bf16(float(scale * std::sqrt(3.0) * (2 * rng.uniform() - 1)));
    }
  });
  return r;
}

double at(const std::vector<uint16_t>& t, int64_t i) { return double(bf16_to_f32(t[size_t(i)])); }

// Non-finite values of a bf16 or fp32 result, with the name for the message.
template <class T>
void expect_finite(const std::string& what, const std::vector<T>& v) {
  const int64_t chunk = 1 << 16, n = int64_t(v.size());
  std::vector<int64_t> per_chunk(size_t((n + chunk - 1) / chunk), 0);
  parallel_for(int64_t(per_chunk.size()), [&](int64_t c) {
    for (int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i) {
      const double x = std::is_same_v<T, float> ? double(v[size_t(i)]) : double(bf16_to_f32(uint16_t(v[size_t(i)])));
      per_chunk[size_t(c)] += !std::isfinite(x);
    }
  });
  int64_t count = 0;
  for (int64_t c : per_chunk) count += c;
  EXPECT_EQ(count, 0) << what << ": " << count << " of " << n << " values are not finite";
}

// The sampled (token, head) pairs: the first and last token and head, the rest spread by a fixed seed.
std::vector<std::array<int64_t, 2>> sampled(int64_t L, int64_t nh, uint64_t seed) {
  std::vector<std::array<int64_t, 2>> s{{0, 0}, {L - 1, nh - 1}};
  Rng rng(seed);
  while (int64_t(s.size()) < std::min<int64_t>(kSampledRows, L * nh)) s.push_back({rng.below(L), rng.below(nh)});
  return s;
}

struct Inputs {
  std::vector<uint16_t> q, k, v, dout;
};
Inputs make_inputs(size_t n, uint64_t seed) {
  return {hashed_bf16(n, seed, 2.0), hashed_bf16(n, seed + 1, 2.0), hashed_bf16(n, seed + 2, 1.0),
          hashed_bf16(n, seed + 3, 1.0)};
}

struct Outputs {
  std::vector<uint16_t> out, dq, dk, dv;
  std::vector<float> lse;
};

// Dense attention (allowed null) or window attention (allowed: Video Swin's cells) on [1, L, nh, d], checked as the
// file's comment says. gpu runs the forward and backward into zeroed gradients.
void check_rows(const VideoAttentionDims& vd, const AttentionMask& allowed, uint64_t seed,
                const std::function<void(const AttentionTensors<uint16_t, float>&, const cuda::Launch&)>& gpu) {
  const int64_t L = vd.L(), nh = vd.nh, d = vd.d;
  const size_t n = size_t(L * nh * d);
  const Inputs in = make_inputs(n, seed);
  Outputs o;
  {
    DeviceBuffer<uint16_t> gq(in.q), gk(in.k), gv(in.v), gdout(in.dout), gout(int64_t(n), uint16_t(0x7fc0)),
        gdq(int64_t(n), uint16_t(0)), gdk(int64_t(n), uint16_t(0)), gdv(int64_t(n), uint16_t(0));
    DeviceBuffer<float> glse(L * nh, std::nanf("")), scratch(cuda::attention_backward_scratch({1, L, L, nh, d}), 0.f);
    gpu({gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), gdout.get(), gdq.get(), gdk.get(), gdv.get()},
        scratch.launch());
    o = {gout.read(), gdq.read(), gdk.read(), gdv.read(), glse.read()};
  }
  for (auto [what, t] : {std::pair{"out", &o.out}, {"dq", &o.dq}, {"dk", &o.dk}, {"dv", &o.dv}})
    expect_finite(what, *t);
  expect_finite("lse", o.lse);

  const double scale = 1.0 / std::sqrt(double(d));
  auto row = [&](int64_t i, int64_t h) { return (i * nh + h) * d; };
  auto score = [&](int64_t i, int64_t j, int64_t h) {
    double s = 0;
    for (int64_t c = 0; c < d; ++c) s += at(in.q, row(i, h) + c) * at(in.k, row(j, h) + c);
    return s * scale;
  };
  // Sampled queries: out, lse, dq in float64 from the inputs alone.
  const auto queries = sampled(L, nh, seed + 10);
  const size_t S = queries.size(), Sd = S * size_t(d);
  std::vector<double> out_ref(Sd), out_got(Sd), lse_ref(S), lse_got(S), dq_ref(Sd), dq_got(Sd);
  parallel_for_dynamic(int64_t(S), [&](int64_t s) {
    const auto [i, h] = queries[size_t(s)];
    std::vector<double> p(size_t(L), 0.0), o64(size_t(d), 0.0), dq(size_t(d), 0.0);
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < L; ++j) {
      p[size_t(j)] = allowed && !allowed(i, j) ? -INFINITY : score(i, j, h);
      mx = std::max(mx, p[size_t(j)]);
    }
    for (double& x : p) sum += (x = std::exp(x - mx));
    double delta = 0;
    for (int64_t j = 0; j < L; ++j)
      if (p[size_t(j)] > 0)
        for (int64_t c = 0; c < d; ++c) o64[size_t(c)] += p[size_t(j)] / sum * at(in.v, row(j, h) + c);
    for (int64_t c = 0; c < d; ++c) delta += o64[size_t(c)] * at(in.dout, row(i, h) + c);
    for (int64_t j = 0; j < L; ++j) {
      if (p[size_t(j)] == 0) continue;
      double dp = 0;
      for (int64_t c = 0; c < d; ++c) dp += at(in.dout, row(i, h) + c) * at(in.v, row(j, h) + c);
      const double ds = p[size_t(j)] / sum * (dp - delta) * scale;
      for (int64_t c = 0; c < d; ++c) dq[size_t(c)] += ds * at(in.k, row(j, h) + c);
    }
    lse_ref[size_t(s)] = mx + std::log(sum);
    lse_got[size_t(s)] = o.lse[size_t(h * L + i)];
    for (int64_t c = 0; c < d; ++c) {
      out_ref[size_t(s * d + c)] = o64[size_t(c)];
      out_got[size_t(s * d + c)] = at(o.out, row(i, h) + c);
      dq_ref[size_t(s * d + c)] = dq[size_t(c)];
      dq_got[size_t(s * d + c)] = at(o.dq, row(i, h) + c);
    }
  });
  expect_close("out", out_got, out_ref, kBf16Tol);
  expect_close("lse", lse_got, lse_ref, kDeviceF32Tol);
  expect_close("dq", dq_got, dq_ref, 2 * kBf16Tol);
  // Sampled keys: dk, dv summed over every query i with P = exp(score - lse_i) and delta_i = dout_i . out_i from the
  // GPU's forward (the backward reads the same bf16 out).
  std::vector<double> delta(size_t(L * nh), 0.0);
  parallel_for(L, [&](int64_t i) {
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t c = 0; c < d; ++c)
        delta[size_t(i * nh + h)] += at(in.dout, row(i, h) + c) * at(o.out, row(i, h) + c);
  });
  const auto keys = sampled(L, nh, seed + 20);
  std::vector<double> dk_ref(Sd), dk_got(Sd), dv_ref(Sd), dv_got(Sd);
  parallel_for_dynamic(int64_t(S), [&](int64_t s) {
    const auto [j, h] = keys[size_t(s)];
    std::vector<double> dk(size_t(d), 0.0), dv(size_t(d), 0.0);
    for (int64_t i = 0; i < L; ++i) {
      if (allowed && !allowed(i, j)) continue;
      const double p = std::exp(score(i, j, h) - double(o.lse[size_t(h * L + i)]));
      double dp = 0;
      for (int64_t c = 0; c < d; ++c) dp += at(in.dout, row(i, h) + c) * at(in.v, row(j, h) + c);
      const double ds = p * (dp - delta[size_t(i * nh + h)]) * scale;
      for (int64_t c = 0; c < d; ++c) {
        dv[size_t(c)] += p * at(in.dout, row(i, h) + c);
        dk[size_t(c)] += ds * at(in.q, row(i, h) + c);
      }
    }
    for (int64_t c = 0; c < d; ++c) {
      dk_ref[size_t(s * d + c)] = dk[size_t(c)];
      dk_got[size_t(s * d + c)] = at(o.dk, row(j, h) + c);
      dv_ref[size_t(s * d + c)] = dv[size_t(c)];
      dv_got[size_t(s * d + c)] = at(o.dv, row(j, h) + c);
    }
  });
  expect_close("dk", dk_got, dk_ref, 2 * kBf16Tol);
  expect_close("dv", dv_got, dv_ref, kBf16Tol);
}

void check_dense(const VideoAttentionDims& vd, uint64_t seed) {
  const AttentionDims a{1, vd.L(), vd.L(), vd.nh, vd.d};
  check_rows(vd, nullptr, seed, [&](const AttentionTensors<uint16_t, float>& t, const cuda::Launch& l) {
    cuda::attention_forward({t, a}, l);
    cuda::attention_backward({t, a}, l);
  });
}

void check_window(const VideoAttentionDims& vd, const std::array<int64_t, 3>& window, uint64_t seed) {
  check_rows(vd, swin_mask(vd, window, true), seed,
             [&](const AttentionTensors<uint16_t, float>& t, const cuda::Launch& l) {
               cuda::window_attention_forward({t, vd, window, true}, l);
               cuda::window_attention_backward({t, vd, window, true}, l);
             });
}

// dsa (offsets) or dsa_fixed (none) with one offset group per head: every output and gradient finite, and heads
// {first, last} against cpu::dsa_forward / dsa_backward in float64 on those heads alone.
void check_dsa(const VideoAttentionDims& vd, bool offsets, uint64_t seed) {
  const int64_t L = vd.L(), nh = vd.nh, d = vd.d;
  const DsaArgs a{{3, 3, 3}, nh};
  const int64_t P = a.P();
  const size_t n = size_t(L * nh * d), no = size_t(L * nh * P * 3);
  const Inputs in = make_inputs(n, seed);
  const std::vector<uint16_t> off = hashed_bf16(no, seed + 5, 1.5);  // samples past the borders on every face
  Outputs o;
  std::vector<uint16_t> doff;
  {
    DeviceBuffer<uint16_t> gq(in.q), gk(in.k), gv(in.v), gdout(in.dout), goff(off), gout(int64_t(n), uint16_t(0x7fc0)),
        gdq(int64_t(n), uint16_t(0)), gdk(int64_t(n), uint16_t(0)), gdv(int64_t(n), uint16_t(0)),
        gdoff(int64_t(no), uint16_t(0));
    DeviceBuffer<float> glse(L * nh, std::nanf("")), scratch(cuda::dsa_backward_scratch(vd, a), std::nanf(""));
    const uint16_t* offp = offsets ? goff.get() : nullptr;
    const DsaParams<uint16_t, float> p{
        {gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), gdout.get(), gdq.get(), gdk.get(), gdv.get()},
        offp,
        offsets ? gdoff.get() : nullptr,
        vd,
        a};
    cuda::dsa_forward(p, scratch.launch());
    cuda::dsa_backward(p, scratch.launch());
    o = {gout.read(), gdq.read(), gdk.read(), gdv.read(), glse.read()};
    doff = gdoff.read();
  }
  for (auto [what, t] : {std::pair{"out", &o.out}, {"dq", &o.dq}, {"dk", &o.dk}, {"dv", &o.dv}, {"doffsets", &doff}})
    expect_finite(what, *t);
  expect_finite("lse", o.lse);
  // Heads {0, nh - 1} sliced out: [L, 2, d] and offsets [L, 2, P, 3].
  const int64_t heads[2] = {0, nh - 1}, hs = nh > 1 ? 2 : 1;
  VideoAttentionDims sd = vd;
  sd.nh = hs;
  const DsaArgs sa{a.window, hs};
  auto slice = [&](const std::vector<uint16_t>& t, int64_t width) {  // width: d per head, or P * 3
    std::vector<double> r(size_t(L * hs * width));
    for (int64_t i = 0; i < L; ++i)
      for (int64_t h = 0; h < hs; ++h)
        for (int64_t c = 0; c < width; ++c)
          r[size_t((i * hs + h) * width + c)] = at(t, (i * nh + heads[h]) * width + c);
    return r;
  };
  const std::vector<double> q = slice(in.q, d), k = slice(in.k, d), v = slice(in.v, d), dout = slice(in.dout, d),
                            offs = slice(off, P * 3);
  std::vector<double> out16 = slice(o.out, d);
  std::vector<double> out(q.size()), lse(size_t(hs * L)), dq(q.size()), dk(q.size()), dv(q.size()), doffs(offs.size());
  const double* offp = offsets ? offs.data() : nullptr;
  cpu::dsa_forward<double>({{q.data(), k.data(), v.data(), out.data(), lse.data()}, offp, nullptr, sd, sa});
  // The backward from the GPU's bf16 out (what the GPU's backward reads) and the float64 lse.
  cpu::dsa_backward<double>(
      {{q.data(), k.data(), v.data(), out16.data(), lse.data(), dout.data(), dq.data(), dk.data(), dv.data()},
       offp,
       offsets ? doffs.data() : nullptr,
       sd,
       sa});
  std::vector<double> lse_got(lse.size());
  for (int64_t h = 0; h < hs; ++h)
    for (int64_t i = 0; i < L; ++i) lse_got[size_t(h * L + i)] = o.lse[size_t(heads[h] * L + i)];
  expect_close("out", slice(o.out, d), out, kBf16Tol);
  expect_close("lse", lse_got, lse, kDeviceF32Tol);
  expect_close("dq", slice(o.dq, d), dq, 2 * kBf16Tol);
  expect_close("dk", slice(o.dk, d), dk, 2 * kBf16Tol);
  expect_close("dv", slice(o.dv, d), dv, kBf16Tol);
  if (offsets) expect_close("doffsets", slice(doff, P * 3), doffs, 2 * kBf16Tol);
}

VideoAttentionDims large() { return {1, kLargeGrid[0], kLargeGrid[1], kLargeGrid[2], kLargeHeads, kLargeHeadDim}; }
// The small grid the emulator runs: odd extents, heads of 40 (padded in the tensor-core tiles).
VideoAttentionDims small() { return {1, 3, 5, 7, 3, 40}; }

TEST(CudaLargeShapes, DenseAt32kTokens) {
  MS_REQUIRE_GPU();
  check_dense(large(), 1000);
}
TEST(CudaLargeShapes, WindowAt32kTokens) {
  MS_REQUIRE_GPU();
  check_window(large(), {4, 8, 8}, 1100);
}
TEST(CudaLargeShapes, DsaAt32kTokens) {
  MS_REQUIRE_GPU();
  check_dsa(large(), true, 1200);
}
TEST(CudaLargeShapes, DsaFixedAt32kTokens) {
  MS_REQUIRE_GPU();
  check_dsa(large(), false, 1300);
}

TEST(CudaLargeShapes, SameChecksOnASmallGrid) {
  MS_REQUIRE_GPU();
  check_dense(small(), 2000);
  check_window(small(), {2, 4, 4}, 2100);
  check_dsa(small(), true, 2200);
  check_dsa(small(), false, 2300);
}

}  // namespace
}  // namespace ms::test
