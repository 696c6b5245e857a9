// `megaslide bench cuda`'s sections on the frozen models (CUDA builds only): Wan2.1's VAE encoding and decoding one
// clip (backend/cuda/vae_ops.h) and umT5-XXL encoding one prompt (backend/cuda/t5_encoder.h), with random weights of
// the real shapes, against GEMM ceilings measured in the same run.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

namespace ms::cli {

// frames x height x width pixels: encode_s, decode_s (medians of `repeats` after a warm-up), their TFLOP/s and
// fraction of fp32_flops (the fp32 GEMM rate), the device memory the passes took (device_used_bytes).
nlohmann::json bench_cuda_vae(int64_t frames, int64_t height, int64_t width, int repeats, double fp32_flops);

// A prompt of `tokens` tokens: upload_s (the weights, once), encode_s, TFLOP/s and fraction of bf16_flops.
nlohmann::json bench_cuda_t5(int64_t tokens, int repeats, double bf16_flops);

}  // namespace ms::cli
