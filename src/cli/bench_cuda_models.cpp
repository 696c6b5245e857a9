#include "cli/bench_cuda_models.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/t5_encoder.h"
#include "backend/cuda/vae_ops.h"
#include "cli/cuda_timing.h"
#include "core/memory_usage.h"
#include "core/rng.h"
#include "model/t5_config.h"
#include "vae/vae_model.h"

namespace ms::cli {
namespace {

int64_t device_used() {
  size_t free = 0, total = 0;
  MS_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return int64_t(total - free);
}

}  // namespace

nlohmann::json bench_cuda_vae(int64_t frames, int64_t height, int64_t width, int repeats, double fp32_flops) {
  const VaeConfig c;  // Wan2.1's
  check_vae_video_shape(c, frames, height, width, "--vae-clip");
  const VaeWeights w = VaeWeights::random(c, 7);
  const int64_t before = device_used();
  const auto ops = cuda::vae_ops(w);
  const int64_t s = c.space_stride(), T = c.latent_frames(frames);
  Rng rng(11);
  std::vector<float> video(size_t(3 * frames * height * width)),
      latents(size_t(c.z_dim * T * (height / s) * (width / s)));
  for (float& v : video) v = float(2 * rng.uniform() - 1);
  std::vector<float> decoded(video.size());
  const double enc = time_host(repeats, [&] { vae_encode(*ops, video.data(), frames, height, width, latents.data()); });
  const double dec =
      time_host(repeats, [&] { vae_decode(*ops, latents.data(), T, height / s, width / s, decoded.data()); });
  const double enc_flops = vae_encode_flops(c, frames, height, width),
               dec_flops = vae_decode_flops(c, frames, height, width);
  return {{"frames", frames},
          {"height", height},
          {"width", width},
          {"encode_s", enc},
          {"decode_s", dec},
          {"encode_tflops", enc_flops / enc / 1e12},
          {"decode_tflops", dec_flops / dec / 1e12},
          {"encode_fraction_of_fp32_gemm", enc_flops / enc / fp32_flops},
          {"decode_fraction_of_fp32_gemm", dec_flops / dec / fp32_flops},
          {"fp32_gemm_tflops", fp32_flops / 1e12},
          {"device_used_bytes", device_used() - before}};
}

nlohmann::json bench_cuda_t5(int64_t tokens, int repeats, double bf16_flops) {
  const T5Config c;  // umT5-XXL
  MS_CHECK(tokens >= 1 && tokens <= c.text_len, "--t5-tokens ", tokens, ": 1 to ", c.text_len);
  require_host_memory("bench cuda's text-encoder section", t5_param_count(c) * 2, "umT5-XXL's random bf16 weights",
                      host_limit(), "Skip the section with --t5-tokens 0");
  const T5Weights w = T5Weights::random(c, 7);
  const auto t0 = std::chrono::steady_clock::now();
  cuda::T5Encoder enc(w);
  const double upload = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Rng rng(13);
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (auto& id : ids) id = int64_t(rng.next_u64() % uint64_t(c.vocab));
  const double s = time_host(repeats, [&] { enc.encode(w, ids); });
  const double flops = t5_encode_flops(c, tokens);
  return {{"tokens", tokens},
          {"upload_s", upload},
          {"encode_s", s},
          {"tflops", flops / s / 1e12},
          {"fraction_of_bf16_gemm", flops / s / bf16_flops},
          {"bf16_gemm_tflops", bf16_flops / 1e12}};
}

}  // namespace ms::cli
