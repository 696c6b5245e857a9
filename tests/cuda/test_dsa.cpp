// The CUDA DSA kernels and the offset network's (depthwise convolution, offset squashing) against the CPU kernels
// in float64 on the same bf16 inputs. The CPU DSA kernels are themselves checked against float64 finite differences
// and against dense and window attention (tests/test_dsa.cpp), so they are the independent reference here. Shapes
// are odd, head dims partial across the lanes, offsets past the borders and, in one case, larger than the grid.
// Skipped without a GPU.
#include <array>
#include <limits>
#include <vector>

#include "backend/cuda/dsa.h"
#include "backend/cuda/dwconv3d.h"
#include "cuda_util.h"
#include "ops/dsa.h"
#include "ops/dwconv3d.h"

namespace ms::test {
namespace {

struct DsaCase {
  VideoAttentionDims d;
  std::array<int64_t, 3> window;
  int64_t groups;
  double offset_scale;                     // 0: dsa_fixed (no offsets)
  int64_t halo_rows = cuda::kDsaHaloRows;  // the kernels' staging space
};

std::vector<double> rounded_bf16(const std::vector<double>& v) {
  std::vector<double> r;
  for (double x : v) r.push_back(double(bf16_to_f32(f32_to_bf16(float(x)))));
  return r;
}

// The float64 CPU forward (the reference) of a case's inputs: out and lse; offsets only where the case has them.
void cpu_forward(const DsaCase& k, const Bf16Input& q, const Bf16Input& kk, const Bf16Input& v, const Bf16Input& off,
                 std::vector<double>& out, std::vector<double>& lse) {
  out.assign(q.values.size(), 0.0);
  lse.assign(size_t(k.d.B * k.d.nh * k.d.L()), 0.0);
  cpu::dsa_forward<double>({{q.values.data(), kk.values.data(), v.values.data(), out.data(), lse.data()},
                            k.offset_scale > 0 ? off.values.data() : nullptr,
                            nullptr,
                            k.d,
                            {k.window, k.groups}});
}

// Tolerances: out, dv are one bf16 rounding over fp32 sums (kBf16Tol); dq, dk and the position gradients take the
// score gradients, whose delta term (dout . out) reads the bf16-rounded out on both sides but is summed in another
// order, then a rounding of their own: twice that.
void check(const DsaCase& k, uint64_t seed) {
  const VideoAttentionDims& d = k.d;
  const DsaArgs a{k.window, k.groups};
  const size_t n = size_t(d.B * d.L() * d.nh * d.d), no = size_t(d.B * d.L() * a.groups * a.P() * 3);
  auto q = random_bf16(n, seed, 2.0), kk = random_bf16(n, seed + 1, 2.0), v = random_bf16(n, seed + 2),
       dout = random_bf16(n, seed + 3), dq0 = random_bf16(n, seed + 4, kAccumulateScale),
       dk0 = random_bf16(n, seed + 5, kAccumulateScale), dv0 = random_bf16(n, seed + 6, kAccumulateScale),
       off = random_bf16(no, seed + 7, k.offset_scale), doff0 = random_bf16(no, seed + 8, kAccumulateScale);
  const bool has_off = k.offset_scale > 0;
  std::vector<double> out, lse;
  cpu_forward(k, q, kk, v, off, out, lse);
  std::vector<double> out16 = rounded_bf16(out);  // what the GPU's backward reads
  std::vector<double> dq = dq0.values, dk = dk0.values, dv = dv0.values, doff = doff0.values;
  cpu::dsa_backward<double>({{q.values.data(), kk.values.data(), v.values.data(), out16.data(), lse.data(),
                              dout.values.data(), dq.data(), dk.data(), dv.data()},
                             has_off ? off.values.data() : nullptr,
                             has_off ? doff.data() : nullptr,
                             d,
                             a});

  DeviceBuffer<uint16_t> gq(q.bits), gk(kk.bits), gv(v.bits), gdout(dout.bits), goff(off.bits),
      gout(std::vector<uint16_t>(n, 0x7fc0));
  DeviceBuffer<float> glse(std::vector<float>(lse.size(), -1.f)),
      scratch(cuda::dsa_backward_scratch(d, a), std::numeric_limits<float>::quiet_NaN());
  const uint16_t* offp = has_off ? goff.get() : nullptr;
  cuda::Launch launch = scratch.launch();
  launch.dsa_halo_rows = k.halo_rows;
  // The staged forward, then the tensor-core one where it applies (head dims up to 128, up to 64 slots), whose out and
  // lse the backward then reads.
  for (bool tensor_cores : {false, true}) {
    SCOPED_TRACE(tensor_cores ? "tensor-core forward" : "staged forward");
    launch.dsa_tensor_cores = tensor_cores;
    cuda::dsa_forward({{gq.get(), gk.get(), gv.get(), gout.get(), glse.get()}, offp, nullptr, d, a}, launch);
    expect_close("out", widen(gout.read()), out, kBf16Tol);
    expect_close("lse", glse.read(), lse, kDeviceF32Tol);
  }
  // The backward with its query side on tensor cores (where it applies) and staged, each twice from the same start:
  // the second must repeat the first bit for bit.
  for (bool tensor_cores : {true, false}) {
    SCOPED_TRACE(tensor_cores ? "tensor-core backward" : "staged backward");
    launch.dsa_tensor_cores = tensor_cores;
    std::vector<std::vector<uint16_t>> runs[2];
    for (auto& r : runs) {
      DeviceBuffer<uint16_t> gdq(dq0.bits), gdk(dk0.bits), gdv(dv0.bits), gdoff(doff0.bits);
      cuda::dsa_backward(
          {{gq.get(), gk.get(), gv.get(), gout.get(), glse.get(), gdout.get(), gdq.get(), gdk.get(), gdv.get()},
           offp,
           has_off ? gdoff.get() : nullptr,
           d,
           a},
          launch);
      r = {gdq.read(), gdk.read(), gdv.read(), gdoff.read()};
    }
    expect_close("dq", widen(runs[0][0]), dq, 2 * kBf16Tol);
    expect_close("dk", widen(runs[0][1]), dk, 2 * kBf16Tol);
    expect_close("dv", widen(runs[0][2]), dv, kBf16Tol);
    if (has_off)
      expect_close("doffsets", widen(runs[0][3]), doff, 2 * kBf16Tol);
    else
      EXPECT_EQ(runs[0][3], doff0.bits) << "dsa_fixed has no position gradients to add";
    for (int i = 0; i < 4; ++i) EXPECT_EQ(runs[0][size_t(i)], runs[1][size_t(i)]) << "gradient " << i << " differs";
  }
}

// Window 3 x 3 x 3, 4 heads of 40 (two channels per lane, the second partly idle) in 2 offset groups, offsets
// N(0, 1.5^2): many samples past the borders, and positions clamped on every face.
TEST(CudaDsa, MatchesCpuWithGroupsAndOffsetsPastTheBorders) {
  MS_REQUIRE_GPU();
  check({{2, 3, 5, 7, 4, 40}, {3, 3, 3}, 2, 1.5}, 11);
}

// Offsets N(0, 0.4^2) (at most about 1.6 tokens) on a grid wider than their reach: the key pass's candidate box is
// smaller than the grid, and its bounds decide which shares reach dk and dv; the staged boxes are parts of the grid.
// Head dim 34: the staging copies channel pairs.
TEST(CudaDsa, BoundedOffsetsOnAWideGrid) {
  MS_REQUIRE_GPU();
  check({{1, 4, 9, 11, 2, 34}, {3, 3, 3}, 2, 0.4}, 53);
}

// Even windows, a window longer than the grid on one axis (t: 4 > 2), head dim 128 (Wan2.1's), one group per head.
TEST(CudaDsa, EvenWindowsAndWindowsLongerThanTheGrid) {
  MS_REQUIRE_GPU();
  check({{1, 2, 6, 5, 2, 128}, {4, 2, 4}, 2, 1.0}, 23);
}

// Offsets several times the grid (the key pass's candidate box is then the whole axis), a single group over three
// heads, head dim 200 (eight channels per lane).
TEST(CudaDsa, OffsetsLargerThanTheGrid) {
  MS_REQUIRE_GPU();
  check({{1, 3, 4, 4, 3, 200}, {3, 3, 3}, 1, 6.0}, 37);
}

// Staging space smaller than the halo. The blocks' tiles are 4 x 7 queries (rows h 0-3) and 2 x 7 (rows 4-5). The
// first's windows span 3 x 5 x 7 = 105 tokens: with 110 rows only those are staged, and the corners the offsets move
// past them come from global memory; with 100 rows it stages nothing, while the second's halo is cut down to fit.
TEST(CudaDsa, HaloLargerThanTheStagingSpace) {
  MS_REQUIRE_GPU();
  for (int64_t rows : {110, 100}) {
    SCOPED_TRACE(rows);
    check({{1, 3, 6, 7, 2, 40}, {3, 3, 3}, 1, 0.8, rows}, 61);
  }
}

// dsa_fixed: no offsets, one corner per slot (neighbourhood attention), head dim 21 (the staging copies single
// channels), window 5 x 3 x 5.
TEST(CudaDsa, FixedWindowMatchesCpu) {
  MS_REQUIRE_GPU();
  check({{2, 4, 5, 6, 3, 21}, {5, 3, 5}, 3, 0.0}, 41);
}

// The tensor-core forward alone (the box of keys every corner can be, 64 rows at a time; S = Q K^T and O = A V on
// mma.sync) against the float64 CPU forward: tiles cut by the grid's end on every axis, offsets several tokens past the
// borders and to the box's edge (the box is the largest offset's), head dims staged by cp.async (64, 128) and element
// by element (24, 16), windows of 27, 45 and 64 slots, two groups, and dsa_fixed.
TEST(CudaDsa, TensorCoreForwardMatchesCpu) {
  MS_REQUIRE_GPU();
  const struct {
    DsaCase k;
    uint64_t seed;
  } cases[] = {{{{1, 2, 9, 11, 2, 64}, {3, 3, 3}, 2, 2.0}, 71},
               {{{2, 3, 5, 9, 2, 24}, {5, 3, 3}, 1, 0.7}, 72},
               {{{1, 5, 6, 7, 1, 128}, {4, 4, 4}, 1, 1.2}, 73},
               {{{1, 2, 10, 9, 2, 16}, {3, 3, 3}, 2, 0.0}, 74}};
  for (const auto& [k, seed] : cases) {
    SCOPED_TRACE(seed);
    const VideoAttentionDims& d = k.d;
    const DsaArgs a{k.window, k.groups};
    const size_t n = size_t(d.B * d.L() * d.nh * d.d), no = size_t(d.B * d.L() * a.groups * a.P() * 3);
    const auto q = random_bf16(n, seed, 2.0), kk = random_bf16(n, seed + 1, 2.0), v = random_bf16(n, seed + 2),
               off = random_bf16(no, seed + 3, k.offset_scale);
    const bool has_off = k.offset_scale > 0;
    std::vector<double> out, lse;
    cpu_forward(k, q, kk, v, off, out, lse);
    DeviceBuffer<uint16_t> gq(q.bits), gk(kk.bits), gv(v.bits), goff(off.bits), gout(std::vector<uint16_t>(n, 0x7fc0));
    DeviceBuffer<float> glse(std::vector<float>(lse.size(), -1.f)), scratch(1, 0.f);
    cuda::dsa_forward(
        {{gq.get(), gk.get(), gv.get(), gout.get(), glse.get()}, has_off ? goff.get() : nullptr, nullptr, d, a},
        scratch.launch());
    expect_close("out", widen(gout.read()), out, kBf16Tol);
    expect_close("lse", glse.read(), lse, kDeviceF32Tol);
  }
}

// The offset squashing range * tanh(raw) and its backward, in place as the model runs it (draw aliases doffsets).
TEST(CudaDsa, OffsetSquashingMatchesCpu) {
  MS_REQUIRE_GPU();
  const int64_t N = 13, M = 2 * 27;
  const std::array<double, 3> range{1.0, 2.0, 2.5};
  const size_t n = size_t(N * M * 3);
  auto raw = random_bf16(n, 5, 1.5), dy = random_bf16(n, 6);
  std::vector<double> y(n), dx(n);
  const DsaOffsetsParams<double> p{raw.values.data(), y.data(), dy.values.data(), dx.data(), range, N, M};
  cpu::dsa_offsets_forward(p);
  cpu::dsa_offsets_backward(p);
  DeviceBuffer<uint16_t> graw(raw.bits), gy(std::vector<uint16_t>(n, 0x7fc0)), gd(dy.bits);
  const cuda::Launch launch{};
  cuda::dsa_offsets_forward({graw.get(), gy.get(), nullptr, nullptr, range, N, M}, launch);
  cuda::dsa_offsets_backward({graw.get(), nullptr, gd.get(), gd.get(), range, N, M}, launch);
  expect_close("offsets", widen(gy.read()), y, kBf16Tol);
  expect_close("draw", widen(gd.read()), dx, kBf16Tol);
}

// The depthwise 3x3x3 convolution on an odd grid (every face and edge has clipped taps), 70 channels (a partial
// warp), more tokens than one weight-gradient partial: dx +=, dw, db += in fp32.
TEST(CudaDsa, DepthwiseConvolutionMatchesCpu) {
  MS_REQUIRE_GPU();
  const int64_t B = 2, T = 3, H = 7, W = 9, C = 70, N = B * T * H * W;
  const size_t nx = size_t(N * C);
  auto x = random_bf16(nx, 1), w = random_bf16(size_t(C * 27), 2, 0.2), b = random_bf16(size_t(C), 3),
       dy = random_bf16(nx, 4), dx0 = random_bf16(nx, 5, kAccumulateScale);
  const std::vector<double> dw0 = randn(size_t(C * 27), 6, kAccumulateScale), db0 = randn(size_t(C), 7);
  std::vector<double> y(nx), dx = dx0.values, dw = dw0, db = db0;
  cpu::dwconv3d_forward<double>({.x = x.values.data(),
                                 .w = w.values.data(),
                                 .b = b.values.data(),
                                 .y = y.data(),
                                 .B = B,
                                 .Tn = T,
                                 .H = H,
                                 .W = W,
                                 .C = C});
  cpu::dwconv3d_backward<double>({.x = x.values.data(),
                                  .w = w.values.data(),
                                  .dy = dy.values.data(),
                                  .dx = dx.data(),
                                  .dw = dw.data(),
                                  .db = db.data(),
                                  .B = B,
                                  .Tn = T,
                                  .H = H,
                                  .W = W,
                                  .C = C});
  DeviceBuffer<uint16_t> gx(x.bits), gw(w.bits), gb(b.bits), gy(std::vector<uint16_t>(nx, 0x7fc0)), gdy(dy.bits),
      gdx(dx0.bits);
  const std::vector<float> dw0f(dw0.begin(), dw0.end()), db0f(db0.begin(), db0.end());
  DeviceBuffer<float> gdw(dw0f), gdb(db0f), scratch(cuda::dwconv3d_backward_scratch(N, C), 0.f);
  cuda::dwconv3d_forward(
      {.x = gx.get(), .w = gw.get(), .b = gb.get(), .y = gy.get(), .B = B, .Tn = T, .H = H, .W = W, .C = C}, nullptr);
  cuda::dwconv3d_backward({.x = gx.get(),
                           .w = gw.get(),
                           .dy = gdy.get(),
                           .dx = gdx.get(),
                           .dw = gdw.get(),
                           .db = gdb.get(),
                           .B = B,
                           .Tn = T,
                           .H = H,
                           .W = W,
                           .C = C},
                          scratch.launch());
  expect_close("y", widen(gy.read()), y, kBf16Tol);
  expect_close("dx", widen(gdx.read()), dx, kBf16Tol);
  // fp32 column sums over 378 tokens of bf16 products: a few ulps of the sum each.
  expect_close("dw", gdw.read(), dw, kDeviceF32Tol);
  expect_close("db", gdb.read(), db, kDeviceF32Tol);
}

}  // namespace
}  // namespace ms::test
