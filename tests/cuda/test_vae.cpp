// The VAE on the GPU (backend/cuda/vae_ops.h): its convolution against plain loops and its channel norm against the
// CPU kernel in float64, on odd shapes, and whole encodes and decodes against the float64 reference of
// tests/vae_reference.h. Nothing here runs OpenBLAS (the lean GPU binaries do without it). Skipped without a GPU.
#include <cmath>

#include "backend/cuda/channel_norm.h"
#include "backend/cuda/conv3d.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/vae_kernels.h"
#include "backend/cuda/vae_ops.h"
#include "cuda_util.h"
#include "ops/channel_norm.h"
#include "vae/vae_model.h"
#include "vae_reference.h"

namespace ms::test {
namespace {

// fp32 results of fp32 sums over at most a few hundred products: a few ulps, far below any wrong tap or band.
constexpr double kTol = 1e-5;

std::vector<float> randf(size_t n, uint64_t seed) { return to_f32(randn(n, seed)); }

// Every geometry the VAE uses, on odd sizes: the causal 3x3x3 conv with a zero (null) frame, the downsampler's stride
// 2 with padding after only, the upsampler's nearest 2x with padding 1, the time conv (3, 1, 1), and 1x1x1. The col
// scratch holds 64-pixel bands, so frames of 99 and more pixels run in several bands with a ragged last one.
TEST(CudaVae, ConvFrameMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  const int64_t ci = 5, co = 7, h = 9, w = 11;
  struct Case {
    const char* name;
    ConvFrameDims d;
    bool null_frame;
  };
  const std::vector<Case> cases = {
      {"causal 3x3x3", {ci, co, 3, 3, 3, h, w, 1, 1, 1, 1, h, w}, true},
      {"stride 2",
       {ci, co, 1, 3, 3, h, w, 1, 2, 0, 0, conv_out_size(h, 3, 2, 0, 1), conv_out_size(w, 3, 2, 0, 1)},
       false},
      {"nearest 2x", {ci, co, 1, 3, 3, h, w, 2, 1, 1, 1, 2 * h, 2 * w}, false},
      {"time (3, 1, 1)", {ci, co, 3, 1, 1, h, w, 1, 1, 0, 0, h, w}, false},
      {"1x1x1", {ci, co, 1, 1, 1, h, w, 1, 1, 0, 0, h, w}, false},
  };
  cuda::GemmContext gemm;
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    const ConvFrameDims& d = k.d;
    std::vector<std::vector<float>> frames;
    for (int64_t a = 0; a < d.kt; ++a) frames.push_back(randf(size_t(ci * h * w), uint64_t(10 + a)));
    const auto wt = randf(size_t(co * d.k()), 20), b = randf(size_t(co), 21);
    std::vector<std::vector<double>> wide;
    std::vector<const double*> x64;
    for (int64_t a = 0; a < d.kt; ++a) wide.emplace_back(frames[size_t(a)].begin(), frames[size_t(a)].end());
    for (int64_t a = 0; a < d.kt; ++a) x64.push_back(k.null_frame && a == 0 ? nullptr : wide[size_t(a)].data());
    const auto want = naive_conv_frame(x64, {wt.begin(), wt.end()}, {b.begin(), b.end()}, d);

    std::vector<std::unique_ptr<DeviceBuffer<float>>> gx;
    std::vector<const float*> x;
    for (int64_t a = 0; a < d.kt; ++a) {
      gx.push_back(std::make_unique<DeviceBuffer<float>>(frames[size_t(a)]));
      x.push_back(k.null_frame && a == 0 ? nullptr : gx.back()->get());
    }
    DeviceBuffer<float> gw(wt), gb(b), gy(int64_t(want.size()), NAN);
    const int64_t col_floats = cuda::conv3d_col_floats(d, d.k() * 64);
    DeviceBuffer<float> col(col_floats, NAN);
    cuda::conv3d_frame_forward(gemm, {.x = x.data(), .w = gw.get(), .b = gb.get(), .y = gy.get(), .d = d}, col.get(),
                               col_floats, nullptr);
    expect_close(std::string("conv ") + k.name, gy.read(), want, kTol);
  }
}

TEST(CudaVae, ChannelRmsNormMatchesTheCpuKernel) {
  MS_REQUIRE_GPU();
  const int64_t C = 13, N = 77;
  const auto x = randf(size_t(C * N), 30), g = randf(size_t(C), 31);
  for (const bool silu : {false, true}) {
    const std::vector<double> x64(x.begin(), x.end()), g64(g.begin(), g.end());
    std::vector<double> want(x64.size());
    cpu::channel_rms_norm_forward<double>(
        {.x = x64.data(), .gamma = g64.data(), .y = want.data(), .C = C, .N = N, .silu = silu});
    DeviceBuffer<float> gx(x), gg(g), gy(C * N, NAN);
    cuda::channel_rms_norm_forward({.x = gx.get(), .gamma = gg.get(), .y = gy.get(), .C = C, .N = N, .silu = silu},
                                   nullptr);
    expect_close(silu ? "norm + silu" : "norm", gy.read(), want, kTol);
  }
}

// Wan2.2's stage shortcuts against the float64 reference's AvgDown3D and DupUp3D: odd widths and sizes, the front
// padding of a lone first frame (a null frame), the frames DupUp3D drops, regrouping 6 -> 24 and 24 -> 3
// channels, so that every digit of the channel index (time, row and column offsets) matters (Wan's own groups cover
// whole 2x2 blocks).
TEST(CudaVae, Wan22ShortcutsMatchTheReference) {
  MS_REQUIRE_GPU();
  const int64_t h = 6, w = 10;
  for (const int64_t T : {1, 2}) {  // one frame padded in front; two frames, one block
    Vid x(6, T, h, w);
    x.v = randn(x.v.size(), uint64_t(40 + T));
    const Vid want = VaeReference::avg_down3d(x, 24, 2, 2);  // [24, 1, 3, 5]
    const auto xf = to_f32(x.v);
    std::vector<float> frames(xf.size());  // [T, 6, h, w], as the walk holds them
    for (int64_t c = 0; c < 6; ++c)
      for (int64_t t = 0; t < T; ++t)
        std::copy_n(&xf[size_t((c * T + t) * h * w)], h * w, &frames[size_t((t * 6 + c) * h * w)]);
    DeviceBuffer<float> gx(frames), gy(24 * 3 * 5, 0.0f);
    cuda::avg_down_add({.x = {T == 2 ? gx.get() : nullptr, gx.get() + (T - 1) * 6 * h * w},
                        .y = gy.get(),
                        .ci = 6,
                        .co = 24,
                        .ft = 2,
                        .s = 2,
                        .h = h,
                        .w = w},
                       nullptr);
    expect_close("avg_down, " + std::to_string(T) + " frames", gy.read(), want.v, kTol);
  }
  Vid x(24, 2, 3, 5);
  x.v = randn(x.v.size(), 45);
  const Vid want = VaeReference::dup_up3d(x, 3, 2, 2);  // [3, 3, 6, 10]: frames 1 of 0, 0 and 1 of 1
  const auto xf = to_f32(x.v);
  for (int64_t q = 0; q < 3; ++q) {
    const int64_t t = (q + 1) / 2, a = (q + 1) % 2;
    std::vector<float> frame(24 * 15);
    for (int64_t c = 0; c < 24; ++c) std::copy_n(&xf[size_t((c * 2 + t) * 15)], 15, &frame[size_t(c * 15)]);
    DeviceBuffer<float> gx(frame), gy(3 * 60, 0.0f);
    cuda::dup_up_add({.x = gx.get(), .y = gy.get(), .ci = 24, .co = 3, .ft = 2, .a = a, .s = 2, .h = 3, .w = 5},
                     nullptr);
    std::vector<double> want_q(3 * 60);
    for (int64_t o = 0; o < 3; ++o) std::copy_n(want.ptr(o, q), 60, &want_q[size_t(o * 60)]);
    expect_close("dup_up, frame " + std::to_string(q), gy.read(), want_q, kTol);
  }
}

// Wan's tiny test config (every layer kind, the attention included) through the chunked, cached walk on the GPU,
// at 1 and 5 frames (frame 0 alone, then a 4-frame chunk), against the float64 whole-clip reference. 2e-5: fp32
// sums over a few thousand products per output (ulps of 6e-8 each), through about 30 layers; a wrong tap, band or
// carried frame is off by 1e-2 or more. The tiles are host code shared with the CPU, tested there. The attention's
// frames (2 x 3 pixels at 16 x 24) go in query blocks of 4 and a ragged 2: its score budget is 24 floats here.
// The same for each VAE kind: Wan2.1's at small widths, and Wan2.2's (its 2x2 patch and stage shortcuts, whose
// averages and duplications run in kernels of their own) at 32 x 48 pixels.
void check_encode_decode(const VaeConfig& c, int64_t H, int64_t W) {
  const VaeWeights w = VaeWeights::random(c, 11);
  const VaeReference ref(w);
  const auto ops = cuda::vae_ops(w, 24);
  for (const int64_t F : {1, 5}) {
    SCOPED_TRACE(std::to_string(F) + " frames");
    Vid video(3, F, H, W);
    video.v = randn(video.v.size(), uint64_t(20 + F), 0.5);
    for (double& v : video.v) v = std::clamp(v, -1.0, 1.0);
    const Vid want = ref.encode(video), dec = ref.decode(want);
    const auto vf = to_f32(video.v), lf = to_f32(want.v);
    std::vector<float> lat(want.v.size()), out(dec.v.size());
    vae_encode(*ops, vf.data(), F, H, W, lat.data());
    expect_close("encode " + std::to_string(F), lat, want.v, 2e-5);
    vae_decode(*ops, lf.data(), want.t, want.h, want.w, out.data());
    expect_close("decode " + std::to_string(F), out, dec.v, 2e-5);
  }
}

TEST(CudaVae, EncodeAndDecodeMatchTheReference) {
  MS_REQUIRE_GPU();
  VaeConfig c;
  c.dim = 8, c.dim_mult = {1, 2, 2, 2}, c.num_res_blocks = 1;
  check_encode_decode(c, 16, 24);
}

TEST(CudaVae, Wan22EncodeAndDecodeMatchTheReference) {
  MS_REQUIRE_GPU();
  VaeConfig c = VaeConfig::wan22();
  c.dim = 8, c.dec_dim = 12, c.z_dim = 4, c.dim_mult = {1, 2, 2, 2}, c.num_res_blocks = 1;
  c.latents_mean = {0.1f, -0.2f, 0.05f, 0.3f};
  c.latents_std = {0.5f, 1.2f, 0.8f, 0.9f};
  check_encode_decode(c, 32, 48);
}

}  // namespace
}  // namespace ms::test
