// The CUDA layers around the norms: linear (cuBLASLt + epilogue bias), modulation and gated residuals,
// RoPE, patchify / unpatchify, the embeddings and the loss, against float64 references on odd shapes.
// Skipped without a GPU.
#include "backend/cuda/embedding.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/layernorm_modulate.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/modulate.h"
#include "backend/cuda/mse_loss.h"
#include "backend/cuda/patchify.h"
#include "backend/cuda/rope.h"
#include "cuda_util.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/mse_loss.h"
#include "ops/patchify.h"
#include "ops/rope.h"
#include "reference_ops.h"

namespace ms::test {
namespace {

// fp32 values exactly representable in float64 and on the device.
std::vector<float> randf(size_t n, uint64_t seed, double scale = 1.0) { return to_f32(randn(n, seed, scale)); }
std::vector<double> wide(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Against plain loops: y = x w^T + b; dx += dy w; dw += dy^T x; db += sum_n dy. The bias in cuBLASLt's epilogue,
// and added by the fallback kernel (forced here; used where cuBLASLt has no epilogue kernel for an alignment).
TEST(CudaLayers, LinearMatchesPlainLoops) {
  MS_REQUIRE_GPU();
  const int64_t N = 77, in = 45, out = 39;
  for (const std::string mode : {"bias in the epilogue", "bias by the fallback kernel", "no bias"}) {
    SCOPED_TRACE(mode);
    const bool bias = mode != "no bias";
    cuda::GemmContext g;
    g.set_bias_epilogue(mode == "bias in the epilogue");
    auto x = random_bf16(static_cast<size_t>(N * in), 1), w = random_bf16(static_cast<size_t>(out * in), 2),
         b = random_bf16(static_cast<size_t>(out), 3), dy = random_bf16(static_cast<size_t>(N * out), 4),
         dx0 = random_bf16(static_cast<size_t>(N * in), 5, kAccumulateScale);
    const std::vector<float> dw0 = randf(static_cast<size_t>(out * in), 6), db0 = randf(static_cast<size_t>(out), 7);
    std::vector<double> y(static_cast<size_t>(N * out), 0.0), dx = dx0.values, dw = wide(dw0), db = wide(db0);
    reference_gemm(false, true, N, out, in, 1.0, x.values, in, w.values, in, 0.0, y);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < out; ++o) {
        if (bias) y[static_cast<size_t>(n * out + o)] += b.values[static_cast<size_t>(o)];
        db[static_cast<size_t>(o)] += bias ? dy.values[static_cast<size_t>(n * out + o)] : 0.0;
      }
    reference_gemm(false, false, N, in, out, 1.0, dy.values, out, w.values, in, 1.0, dx);
    reference_gemm(true, false, out, in, N, 1.0, dy.values, out, x.values, in, 1.0, dw);

    DeviceBuffer<uint16_t> gx(x.bits), gw(w.bits), gb(b.bits), gdy(dy.bits), gdx(dx0.bits),
        gy(N * out, 0x7fc0);  // NaN poison: every element must be written
    DeviceBuffer<float> gdw(dw0), gdb(db0), scratch(cuda::linear_backward_scratch(N, out), 0.f);
    cuda::linear_forward(
        g, {.x = gx.get(), .w = gw.get(), .b = bias ? gb.get() : nullptr, .y = gy.get(), .N = N, .in = in, .out = out},
        nullptr);
    cuda::linear_backward(g,
                          {.x = gx.get(),
                           .w = gw.get(),
                           .dy = gdy.get(),
                           .dx = gdx.get(),
                           .dw = gdw.get(),
                           .db = bias ? gdb.get() : nullptr,
                           .N = N,
                           .in = in,
                           .out = out},
                          scratch.launch());
    // The fallback rounds the product to bf16 before adding the bias: two roundings.
    expect_close(std::string(bias ? "bias_" : "plain_") + "y", widen(gy.read()), y,
                 mode == "bias by the fallback kernel" ? 2 * kBf16Tol : kBf16Tol);
    expect_close(std::string(bias ? "bias_" : "plain_") + "dx", widen(gdx.read()), dx, kBf16Tol);
    expect_close(std::string(bias ? "bias_" : "plain_") + "dw", gdw.read(), dw, kDeviceF32Tol);
    expect_close(std::string(bias ? "bias_" : "plain_") + "db", gdb.read(), db, kDeviceF32Tol);
    if (mode == "bias by the fallback kernel") {
      EXPECT_EQ(g.bias_fallbacks(), 1) << "the forced fallback was not taken";
    }
    // On a GPU, whether cuBLASLt had an epilogue kernel for these odd shapes (tools/device-check.sh reports it).
    if (mode == "bias in the epilogue") RecordProperty("bias_fallbacks", int(g.bias_fallbacks()));
  }
}

// The block's use: shift, scale and gate are chunks of e0 [B, 6, C] (stride 6 C).
// The time path's fp32 linear (a few rows; the warp-per-output forward over `in` > 32 lanes, odd sizes) against
// plain loops in float64 on the same fp32 inputs and bf16 weights: fp32 sums, kDeviceF32Tol.
TEST(CudaLayers, LinearF32MatchesPlainLoops) {
  MS_REQUIRE_GPU();
  const int64_t N = 3, in = 141, out = 67;
  for (bool bias : {true, false}) {
    SCOPED_TRACE(bias ? "bias" : "no bias");
    const std::vector<float> x = randf(size_t(N * in), 31), dy = randf(size_t(N * out), 32),
                             dx0 = randf(size_t(N * in), 33, kAccumulateScale),
                             dw0 = randf(size_t(out * in), 34, kAccumulateScale),
                             db0 = randf(size_t(out), 35, kAccumulateScale);
    auto w = random_bf16(size_t(out * in), 36), b = random_bf16(size_t(out), 37);
    std::vector<double> y(size_t(N * out)), dx = wide(dx0), dw = wide(dw0), db = wide(db0);
    const std::vector<double> xd = wide(x), dyd = wide(dy);
    reference_linear_forward(xd.data(), w.values.data(), bias ? b.values.data() : nullptr, y.data(), N, in, out);
    reference_linear_backward(xd.data(), w.values.data(), dyd.data(), dx.data(), dw.data(), bias ? db.data() : nullptr,
                              N, in, out);
    DeviceBuffer<float> gx(x), gdy(dy), gy(N * out, -1.f), gdx(dx0), gdw(dw0), gdb(db0);
    DeviceBuffer<uint16_t> gw(w.bits), gb(b.bits);
    cuda::linear_f32_forward(
        {.x = gx.get(), .w = gw.get(), .b = bias ? gb.get() : nullptr, .y = gy.get(), .N = N, .in = in, .out = out},
        nullptr);
    cuda::linear_f32_backward({.x = gx.get(),
                               .w = gw.get(),
                               .dy = gdy.get(),
                               .dx = gdx.get(),
                               .dw = gdw.get(),
                               .db = bias ? gdb.get() : nullptr,
                               .N = N,
                               .in = in,
                               .out = out},
                              nullptr);
    expect_close("y", gy.read(), y, kDeviceF32Tol);
    expect_close("dx", gdx.read(), dx, kDeviceF32Tol);
    expect_close("dw", gdw.read(), dw, kDeviceF32Tol);
    expect_close("db", gdb.read(), db, kDeviceF32Tol);
  }
}

TEST(CudaLayers, ModulateAndGateResidualMatchCpuReference) {
  MS_REQUIRE_GPU();
  const int64_t B = 2, L = 101, C = 67, stride = 6 * C;
  auto x = random_bf16(static_cast<size_t>(B * L * C), 11), y = random_bf16(static_cast<size_t>(B * L * C), 12),
       dy = random_bf16(static_cast<size_t>(B * L * C), 13),
       dx0 = random_bf16(static_cast<size_t>(B * L * C), 14, kAccumulateScale),
       dres0 = random_bf16(static_cast<size_t>(B * L * C), 15, kAccumulateScale);
  const std::vector<float> e0 = randf(static_cast<size_t>(B * stride), 16, 0.5),
                           de00 = randf(static_cast<size_t>(B * stride), 17);
  const std::vector<double> e0d = wide(e0);
  const double *shift = e0d.data(), *scale = e0d.data() + C, *gate = e0d.data() + 2 * C;
  std::vector<double> mod(static_cast<size_t>(B * L * C)), out(static_cast<size_t>(B * L * C)),
      dx = dx0.values, dres = dres0.values, de0 = wide(de00);
  cpu::modulate_forward<double>({.x = x.values.data(),
                                 .shift = shift,
                                 .scale = scale,
                                 .y = mod.data(),
                                 .B = B,
                                 .L = L,
                                 .C = C,
                                 .stride = stride});
  cpu::modulate_backward<double>({.x = x.values.data(),
                                  .scale = scale,
                                  .dy = dy.values.data(),
                                  .dx = dx.data(),
                                  .dshift = de0.data(),
                                  .dscale = de0.data() + C,
                                  .B = B,
                                  .L = L,
                                  .C = C,
                                  .stride = stride});
  cpu::gate_residual_forward<double>({.x = x.values.data(),
                                      .y = y.values.data(),
                                      .gate = gate,
                                      .out = out.data(),
                                      .B = B,
                                      .L = L,
                                      .C = C,
                                      .stride = stride});
  std::vector<double> dx_gate = dx0.values;
  cpu::gate_residual_backward<double>({.y = y.values.data(),
                                       .gate = gate,
                                       .dout = dy.values.data(),
                                       .dx = dx_gate.data(),
                                       .dy = dres.data(),
                                       .dgate = de0.data() + 2 * C,
                                       .B = B,
                                       .L = L,
                                       .C = C,
                                       .stride = stride});

  DeviceBuffer<uint16_t> gx(x.bits), gy(y.bits), gdy(dy.bits), gdx(dx0.bits), gdx_gate(dx0.bits), gdres(dres0.bits),
      gmod(B * L * C, 0x7fc0), gout(B * L * C, 0x7fc0);
  DeviceBuffer<float> ge0(e0), gde0(de00), scratch(cuda::modulate_backward_scratch(L, C), 0.f);
  const float* ge = ge0.get();
  cuda::modulate_forward(
      {.x = gx.get(), .shift = ge, .scale = ge + C, .y = gmod.get(), .B = B, .L = L, .C = C, .stride = stride},
      nullptr);
  cuda::modulate_backward({.x = gx.get(),
                           .scale = ge + C,
                           .dy = gdy.get(),
                           .dx = gdx.get(),
                           .dshift = gde0.get(),
                           .dscale = gde0.get() + C,
                           .B = B,
                           .L = L,
                           .C = C,
                           .stride = stride},
                          scratch.launch());
  cuda::gate_residual_forward(
      {.x = gx.get(), .y = gy.get(), .gate = ge + 2 * C, .out = gout.get(), .B = B, .L = L, .C = C, .stride = stride},
      nullptr);
  cuda::gate_residual_backward({.y = gy.get(),
                                .gate = ge + 2 * C,
                                .dout = gdy.get(),
                                .dx = gdx_gate.get(),
                                .dy = gdres.get(),
                                .dgate = gde0.get() + 2 * C,
                                .B = B,
                                .L = L,
                                .C = C,
                                .stride = stride},
                               scratch.launch());
  expect_close("modulate_y", widen(gmod.read()), mod, kBf16Tol);
  expect_close("modulate_dx", widen(gdx.read()), dx, kBf16Tol);
  expect_close("gate_out", widen(gout.read()), out, kBf16Tol);
  expect_close("gate_dx", widen(gdx_gate.read()), dx_gate, kBf16Tol);
  expect_close("gate_dy", widen(gdres.read()), dres, kBf16Tol);
  expect_close("de0", gde0.read(), de0, kDeviceF32Tol);  // dshift, dscale, dgate and the untouched chunks
  // Without a gate (the cross-attention residual): out = x + y, dy += dout.
  std::vector<double> plain(static_cast<size_t>(B * L * C)), dres_plain = dres0.values;
  cpu::gate_residual_forward<double>(
      {.x = x.values.data(), .y = y.values.data(), .out = plain.data(), .B = B, .L = L, .C = C, .stride = stride});
  cpu::gate_residual_backward<double>({.y = y.values.data(),
                                       .dout = dy.values.data(),
                                       .dy = dres_plain.data(),
                                       .B = B,
                                       .L = L,
                                       .C = C,
                                       .stride = stride});
  DeviceBuffer<uint16_t> gplain(B * L * C, 0x7fc0), gdres_plain(dres0.bits);
  cuda::gate_residual_forward(
      {.x = gx.get(), .y = gy.get(), .out = gplain.get(), .B = B, .L = L, .C = C, .stride = stride}, nullptr);
  cuda::gate_residual_backward(
      {.y = gy.get(), .dout = gdy.get(), .dy = gdres_plain.get(), .B = B, .L = L, .C = C, .stride = stride},
      scratch.launch());
  expect_close("residual_out", widen(gplain.read()), plain, kBf16Tol);
  expect_close("residual_dy", widen(gdres_plain.read()), dres_plain, kBf16Tol);
}

// The fused norm + modulation against the CPU's two ops (the FFN's chunks 3 and 4 of e0), 389 channels: more than
// a row block's threads; 73 rows per sample: two chunks of the per-sample sums.
TEST(CudaLayers, LayerNormModulateMatchesTheCpuOpsComposed) {
  MS_REQUIRE_GPU();
  const int64_t B = 2, L = 73, C = 389, stride = 6 * C, N = B * L;
  auto x = random_bf16(static_cast<size_t>(N * C), 71, 2.0), dy = random_bf16(static_cast<size_t>(N * C), 72),
       dx0 = random_bf16(static_cast<size_t>(N * C), 73, kAccumulateScale);
  const std::vector<float> e0 = randf(static_cast<size_t>(B * stride), 74, 0.5),
                           de00 = randf(static_cast<size_t>(B * stride), 75, kAccumulateScale);
  const std::vector<double> e0d = wide(e0);
  const double *shift = e0d.data() + 3 * C, *scale = e0d.data() + 4 * C;
  std::vector<double> ln(static_cast<size_t>(N * C)), mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N)),
      y(static_cast<size_t>(N * C)), dln(static_cast<size_t>(N * C), 0.0), dx = dx0.values, de0 = wide(de00);
  cpu::layernorm_forward<double>(
      {.x = x.values.data(), .y = ln.data(), .mean = mean.data(), .rstd = rstd.data(), .N = N, .C = C, .eps = 1e-6});
  cpu::modulate_forward<double>(
      {.x = ln.data(), .shift = shift, .scale = scale, .y = y.data(), .B = B, .L = L, .C = C, .stride = stride});
  cpu::modulate_backward<double>({.x = ln.data(),
                                  .scale = scale,
                                  .dy = dy.values.data(),
                                  .dx = dln.data(),
                                  .dshift = de0.data() + 3 * C,
                                  .dscale = de0.data() + 4 * C,
                                  .B = B,
                                  .L = L,
                                  .C = C,
                                  .stride = stride});
  cpu::layernorm_backward<double>({.x = x.values.data(),
                                   .mean = mean.data(),
                                   .rstd = rstd.data(),
                                   .dy = dln.data(),
                                   .dx = dx.data(),
                                   .N = N,
                                   .C = C});
  DeviceBuffer<uint16_t> gx(x.bits), gdy(dy.bits), gdx(dx0.bits), gy(N * C, 0x7fc0);
  DeviceBuffer<float> ge0(e0), gde0(de00), gmean(N, -1.f), grstd(N, -1.f),
      scratch(cuda::layernorm_modulate_backward_scratch(L, C), 0.f);
  cuda::layernorm_modulate_forward({.x = gx.get(),
                                    .shift = ge0.get() + 3 * C,
                                    .scale = ge0.get() + 4 * C,
                                    .y = gy.get(),
                                    .mean = gmean.get(),
                                    .rstd = grstd.get(),
                                    .B = B,
                                    .L = L,
                                    .C = C,
                                    .stride = stride,
                                    .eps = 1e-6},
                                   nullptr);
  cuda::layernorm_modulate_backward({.x = gx.get(),
                                     .scale = ge0.get() + 4 * C,
                                     .mean = gmean.get(),
                                     .rstd = grstd.get(),
                                     .dy = gdy.get(),
                                     .dx = gdx.get(),
                                     .dshift = gde0.get() + 3 * C,
                                     .dscale = gde0.get() + 4 * C,
                                     .B = B,
                                     .L = L,
                                     .C = C,
                                     .stride = stride},
                                    scratch.launch());
  expect_close("y", widen(gy.read()), y, kBf16Tol);
  expect_close("mean", gmean.read(), mean, kDeviceF32Tol);
  expect_close("rstd", grstd.read(), rstd, kDeviceF32Tol);
  expect_close("dx", widen(gdx.read()), dx, kBf16Tol);
  expect_close("de0", gde0.read(), de0, kDeviceF32Tol);
}

// d = 38: 19 pairs split 7 / 6 / 6, so no axis part is a multiple of 2 pairs of another.
TEST(CudaLayers, RopeMatchesCpuReferenceAndInvertsItself) {
  MS_REQUIRE_GPU();
  const int64_t B = 2, F = 3, H = 5, W = 7, nh = 3, d = 38, n = B * F * H * W * nh * d;
  auto x = random_bf16(static_cast<size_t>(n), 21);
  std::vector<double> y(static_cast<size_t>(n)), back(static_cast<size_t>(n));
  cpu::rope_forward<double>({.x = x.values.data(), .y = y.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  cpu::rope_backward<double>(
      {.dy = x.values.data(), .dx = back.data(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d});
  DeviceBuffer<uint16_t> gx(x.bits), gy(n, 0x7fc0), gb(x.bits);
  cuda::rope_forward({.x = gx.get(), .y = gy.get(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d}, nullptr);
  cuda::rope_backward({.dy = gb.get(), .dx = gb.get(), .B = B, .F = F, .H = H, .W = W, .nh = nh, .d = d},
                      nullptr);  // in place, as the block uses it
  expect_close("forward", widen(gy.read()), y, kBf16Tol);
  expect_close("backward", widen(gb.read()), back, kBf16Tol);
}

// Re-layouts are exact: bf16 of the reference's element, or the bf16 value widened.
TEST(CudaLayers, PatchifyAndUnpatchifyMoveEveryElementExactly) {
  MS_REQUIRE_GPU();
  for (const PatchDims d : {PatchDims{2, 5, 4, 6, 10, 1, 2, 2}, PatchDims{1, 3, 6, 4, 6, 2, 2, 3}}) {
    const int64_t video = d.B * d.C * d.F * d.H * d.W;
    const std::vector<float> lat = randf(static_cast<size_t>(video), 31);
    std::vector<float> patches(static_cast<size_t>(video)), dlat(static_cast<size_t>(video));
    cpu::patchify_forward<float>({.latents = lat.data(), .patches = patches.data(), .d = d});
    auto tok = random_bf16(static_cast<size_t>(video), 32);
    std::vector<double> vid(static_cast<size_t>(video)), dtok(static_cast<size_t>(video));
    cpu::unpatchify_forward<double>({.tokens = tok.values.data(), .video = vid.data(), .d = d});
    cpu::unpatchify_backward<double>({.dvideo = wide(lat).data(), .dtokens = dtok.data(), .d = d});
    DeviceBuffer<float> glat(lat), gvid(video, -1.f), gdlat(video, -1.f);
    DeviceBuffer<uint16_t> gpatch(video, 0x7fc0), gtok(tok.bits), gdtok(video, 0x7fc0);
    cuda::patchify_forward({.latents = glat.get(), .patches = gpatch.get(), .d = d}, nullptr);
    cuda::patchify_backward({.dpatches = gpatch.get(), .dlatents = gdlat.get(), .d = d}, nullptr);
    cuda::unpatchify_forward({.tokens = gtok.get(), .video = gvid.get(), .d = d}, nullptr);
    cuda::unpatchify_backward({.dvideo = glat.get(), .dtokens = gdtok.get(), .d = d}, nullptr);
    std::vector<uint16_t> want_patch, want_dtok;
    for (float v : patches) want_patch.push_back(f32_to_bf16(v));
    for (double v : dtok) want_dtok.push_back(f32_to_bf16(float(v)));
    std::vector<float> want_dlat;  // patchify_backward of bf16(patches): the latents rounded to bf16
    for (float v : lat) want_dlat.push_back(bf16_to_f32(f32_to_bf16(v)));
    EXPECT_EQ(gpatch.read(), want_patch);
    EXPECT_EQ(gdlat.read(), want_dlat);
    EXPECT_EQ(gvid.read(), to_f32(vid));
    EXPECT_EQ(gdtok.read(), want_dtok);
  }
}

TEST(CudaLayers, EmbeddingsMatchCpuReference) {
  MS_REQUIRE_GPU();
  const int64_t B = 3, dim = 250, Lc = 7, Lt = 11, C = 37;
  std::vector<float> t = randf(static_cast<size_t>(B), 41);
  for (float& v : t) v = std::fabs(v) * 400.f;  // t * 1000 lies in [0, 1000]
  std::vector<double> emb(static_cast<size_t>(B * dim));
  cpu::sinusoidal_embedding<double>({.t = wide(t).data(), .out = emb.data(), .B = B, .dim = dim});
  const std::vector<float> ctx = randf(static_cast<size_t>(B * Lc * C), 42);
  std::vector<float> padded(static_cast<size_t>(B * Lt * C));
  cpu::pad_context_forward<float>({.context = ctx.data(), .padded = padded.data(), .B = B, .Lc = Lc, .Lt = Lt, .C = C});
  DeviceBuffer<float> gt(t), gemb(B * dim, -1.f), gctx(ctx), gdctx(B * Lc * C, -1.f);
  DeviceBuffer<uint16_t> gpad(B * Lt * C, 0x7fc0);
  cuda::sinusoidal_embedding({.t = gt.get(), .out = gemb.get(), .B = B, .dim = dim}, nullptr);
  cuda::pad_context_forward({.context = gctx.get(), .padded = gpad.get(), .B = B, .Lc = Lc, .Lt = Lt, .C = C}, nullptr);
  cuda::pad_context_backward({.dpadded = gpad.get(), .dcontext = gdctx.get(), .B = B, .Lc = Lc, .Lt = Lt, .C = C},
                             nullptr);
  expect_close("sinusoidal", gemb.read(), emb, 1e-6);  // float64 angles, one fp32 rounding
  std::vector<uint16_t> want_pad;
  for (float v : padded) want_pad.push_back(f32_to_bf16(v));
  std::vector<float> want_dctx;  // the context through bf16 and back
  for (float v : ctx) want_dctx.push_back(bf16_to_f32(f32_to_bf16(v)));
  EXPECT_EQ(gpad.read(), want_pad);
  EXPECT_EQ(gdctx.read(), want_dctx);
}

// Whole, and with the first 311 of each run of 7001 values left out (TI2V's clean first frame).
TEST(CudaLayers, MseLossMatchesCpuReference) {
  MS_REQUIRE_GPU();
  const int64_t n = 98014;  // 14 runs of 7001
  const std::vector<float> pred = randf(static_cast<size_t>(n), 51), target = randf(static_cast<size_t>(n), 52);
  for (const int64_t skip : {0, 311}) {
    SCOPED_TRACE("skip " + std::to_string(skip));
    const MseLossParams<float> runs{.n = n, .scale = 0.5, .period = 7001, .skip = skip};
    std::vector<float> dpred(static_cast<size_t>(n));
    MseLossParams<float> p = runs;
    p.pred = pred.data(), p.target = target.data(), p.dpred = dpred.data();
    const double loss = cpu::mse_loss<float>(p);
    DeviceBuffer<float> gp(pred), gt(target), gd(n, -1.f);
    DeviceBuffer<double> gl(std::vector<double>(1, -1.0)), scratch(cuda::mse_loss_scratch(n), 0.0);
    p.pred = gp.get(), p.target = gt.get(), p.dpred = gd.get();
    cuda::mse_loss(p, gl.get(), scratch.get(), nullptr);
    EXPECT_NEAR(gl.read()[0], loss, 1e-12 * loss);  // float64 sums in another order
    expect_close("dpred", gd.read(), dpred, 1e-7);  // the same float64 expression, one fp32 rounding
  }
}

}  // namespace
}  // namespace ms::test
