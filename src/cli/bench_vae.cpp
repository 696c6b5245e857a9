// `megaslide bench vae`: Wan's VAE (2.1, or 2.2 with --kind) encoding and decoding 5-frame clips on the CPU,
// frames/s and achieved GFLOP/s against the sgemm rate measured in the same run, peak memory; the conv kernel alone on
// the VAE's two heaviest convolutions; and the plan-style arithmetic of a whole 81 x 480 x 832 clip here and on an
// H200. The PyTorch peer is bench/vae_torch.py (docs/benchmarks.md).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "backend/cpu/gemm.h"
#include "cli/ceilings.h"
#include "cli/commands.h"
#include "core/check.h"
#include "core/memory_usage.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "core/units.h"
#include "ops/conv3d.h"
#include "plan/hardware.h"
#include "vae/vae_model.h"

namespace ms::cli {
namespace {

struct BenchVaeArgs {
  std::vector<std::string> sizes{"64x64", "480x832"};
  int64_t frames = 5;
  std::string vae, config;      // "": random weights of the config
  std::string kind = "wan2.1";  // random weights of Wan2.1's or Wan2.2's shapes when no --vae-config
  bool json = false;
};

std::vector<float> random_values(int64_t n, uint64_t seed, double scale) {
  Rng r(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(std::clamp(scale * r.normal(), -1.0, 1.0));
  return v;
}

// The conv kernel alone on one output frame of a 3x3x3 causal conv: FLOP/s, best of 3.
double conv_rate(int64_t c, int64_t h, int64_t w) {
  const ConvFrameDims d{
      .ci = c, .co = c, .kt = 3, .kh = 3, .kw = 3, .h = h, .w = w, .pad_top = 1, .pad_left = 1, .out_h = h, .out_w = w};
  const auto x = random_values(3 * c * h * w, 1, 1.0), wt = random_values(d.co * d.k(), 2, 0.02);
  std::vector<float> y(size_t(c * h * w));
  const float* in[3] = {x.data(), x.data() + c * h * w, x.data() + 2 * c * h * w};
  double best = 1e30;
  for (int r = 0; r < 3; ++r)
    best = std::min(best, wall_seconds([&] {
                      cpu::conv3d_frame_forward<float>({.x = in, .w = wt.data(), .y = y.data(), .d = d});
                    }));
  return d.flops() / best;
}

void bench_vae(const BenchVaeArgs& a) {
  const VaeWeights w = !a.vae.empty()       ? VaeWeights::load(a.vae, a.config)
                       : !a.config.empty()  ? VaeWeights::random(read_vae_config(a.config), 7)
                       : a.kind == "wan2.2" ? VaeWeights::random(VaeConfig::wan22(), 7)
                                            : VaeWeights::random(VaeConfig(), 7);
  const VaeConfig& c = w.config();
  check_vae_video_shape(c, a.frames, c.space_stride(), c.space_stride(), "--frames");
  const double sgemm = measure_sgemm_rate(2048);
  nlohmann::json j{{"threads", num_threads()},
                   {"params", w.count()},
                   {"weights", w.source()},
                   {"sgemm_gflops", sgemm / 1e9},
                   {"sgemm_kernels", cpu::openblas_coretype()},
                   {"frames", a.frames},
                   {"sizes", nlohmann::json::array()}};
  if (!a.json)
    std::printf("%s VAE (%s, %.1f M parameters), %d threads; sgemm 2048^3 %.1f GFLOP/s (OpenBLAS %s kernels)\n",
                c.is_residual ? "Wan2.2" : "Wan2.1", w.source().c_str(), double(w.count()) / 1e6, num_threads(),
                sgemm / 1e9, cpu::openblas_coretype());
  // The conv kernel alone: the encoder's first stage (dim channels at full size) and its last (4 dim at 1/8).
  const int64_t top = c.dim * c.dim_mult.front(), low = c.dim * c.dim_mult.back();
  const double conv_top = conv_rate(top, 120, 208), conv_low = conv_rate(low, 60, 104);
  j["conv"] = {{"full_size",
                {{"channels", top},
                 {"pixels", {120, 208}},
                 {"gflops", conv_top / 1e9},
                 {"fraction_of_sgemm", conv_top / sgemm}}},
               {"low_res",
                {{"channels", low},
                 {"pixels", {60, 104}},
                 {"gflops", conv_low / 1e9},
                 {"fraction_of_sgemm", conv_low / sgemm}}}};
  if (!a.json)
    std::printf(
        "conv3d 3x3x3 frame kernel: %lld ch at 120x208 %.1f GFLOP/s (%.3f of sgemm), %lld ch at 60x104 "
        "%.1f GFLOP/s (%.3f of sgemm)\n",
        (long long)top, conv_top / 1e9, conv_top / sgemm, (long long)low, conv_low / 1e9, conv_low / sgemm);
  for (const std::string& size : a.sizes) {
    int64_t H = 0, W = 0;
    if (std::sscanf(size.c_str(), "%ldx%ld", &H, &W) != 2) MS_FAIL("--sizes: ", size, " is not HxW, e.g. 480x832");
    check_vae_video_shape(c, a.frames, H, W, "--sizes " + size);
    const int64_t s = c.space_stride(), T = c.latent_frames(a.frames);
    const auto video = random_values(3 * a.frames * H * W, 3, 0.5);
    std::vector<float> latents(size_t(c.z_dim * T * (H / s) * (W / s))), decoded(video.size());
    // Peak memory of each pass above what is resident before it (the clip, latents and output already written),
    // beside what vae_encode_bytes / vae_decode_bytes count for it (what the verbs check host memory with).
    const auto measured = [](const std::function<void()>& f) {
      const int64_t before = resident_bytes();
      reset_peak_resident();
      const double t = wall_seconds(f);
      return std::pair{t, peak_resident_bytes() - before};
    };
    const auto [enc, grew_enc] = measured([&] { vae_encode(w, video.data(), a.frames, H, W, latents.data()); });
    const auto [dec, grew_dec] = measured([&] { vae_decode(w, latents.data(), T, H / s, W / s, decoded.data()); });
    const double fe = vae_encode_flops(c, a.frames, H, W), fd = vae_decode_flops(c, a.frames, H, W);
    const int64_t counted_enc = vae_encode_bytes(c, a.frames, H, W), counted_dec = vae_decode_bytes(c, a.frames, H, W);
    j["sizes"].push_back({{"height", H},
                          {"width", W},
                          {"encode",
                           {{"seconds", enc},
                            {"frames_per_s", a.frames / enc},
                            {"gflop", fe / 1e9},
                            {"gflops", fe / enc / 1e9},
                            {"fraction_of_sgemm", fe / enc / sgemm},
                            {"peak_growth_bytes", grew_enc},
                            {"counted_bytes", counted_enc}}},
                          {"decode",
                           {{"seconds", dec},
                            {"frames_per_s", a.frames / dec},
                            {"gflop", fd / 1e9},
                            {"gflops", fd / dec / 1e9},
                            {"fraction_of_sgemm", fd / dec / sgemm},
                            {"peak_growth_bytes", grew_dec},
                            {"counted_bytes", counted_dec}}}});
    if (!a.json)
      for (auto [op, t, f, grew, counted] :
           {std::tuple<const char*, double, double, int64_t, int64_t>{"encode", enc, fe, grew_enc, counted_enc},
            {"decode", dec, fd, grew_dec, counted_dec}})
        std::printf(
            "%4lldx%-4lld %lld frames %s: %8.2f s, %7.3f frames/s, %9.1f GFLOP, %6.1f GFLOP/s, %.3f of sgemm, "
            "memory +%s (counted %s)\n",
            (long long)H, (long long)W, (long long)a.frames, op, t, a.frames / t, f / 1e9, f / t / 1e9, f / t / sgemm,
            format_bytes(double(grew)).c_str(), format_bytes(double(counted)).c_str());
  }
  // A whole Wan clip: its FLOPs, and the time at this run's sgemm rate and at an H200's dense bf16 peak.
  const double fe81 = vae_encode_flops(c, 81, 480, 832), fd81 = vae_decode_flops(c, 81, 480, 832);
  const double h200 = hardware_profile("h200").flops_per_s;
  j["clip_81x480x832"] = {{"encode_tflop", fe81 / 1e12},
                          {"decode_tflop", fd81 / 1e12},
                          {"encode_seconds_at_sgemm", fe81 / sgemm},
                          {"decode_seconds_at_sgemm", fd81 / sgemm},
                          {"encode_seconds_h200_peak", fe81 / h200},
                          {"decode_seconds_h200_peak", fd81 / h200}};
  if (a.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "81x480x832 clip: encode %.1f TFLOP, decode %.1f TFLOP; at this CPU's sgemm rate >= %.0f s and %.0f s; "
      "on an H200 at its dense bf16 peak (%.0f TFLOP/s) >= %.2f s and %.2f s\n",
      fe81 / 1e12, fd81 / 1e12, fe81 / sgemm, fd81 / sgemm, h200 / 1e12, fe81 / h200, fd81 / h200);
}

}  // namespace

void add_bench_vae(CLI::App& bench) {
  auto a = std::make_shared<BenchVaeArgs>();
  CLI::App* cmd = bench.add_subcommand("vae", "Wan's VAEs: encode / decode frames/s and GFLOP/s against sgemm");
  cmd->add_option("--sizes", a->sizes, "Frame sizes HxW, multiples of the VAE's stride (8; Wan2.2: 16)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--frames", a->frames, "Frames per clip (1 + 4k)")->capture_default_str();
  cmd->add_option("--vae", a->vae, "VAE weights (default: random weights of --kind's shapes)");
  cmd->add_option("--kind", a->kind, "The random weights' VAE: wan2.1 or wan2.2")
      ->check(CLI::IsMember({"wan2.1", "wan2.2"}))
      ->capture_default_str();
  cmd->add_option("--vae-config", a->config, "VAE config JSON (default: --kind's)");
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->callback([a] { bench_vae(*a); });
}

}  // namespace ms::cli
