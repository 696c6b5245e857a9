// `megaslide bench cuda`: the GPU's ceilings measured in one run (pinned-copy H2D / D2H / both at once,
// device-to-device copy, cuBLASLt bf16 and fp32 GEMM rates) and the runtime's own copy path (CudaBackend streams,
// pools pinned in place) as a fraction of the pinned ceiling; then a block, attention, the streamed step, and the
// frozen models (the VAE, the text encoder) against those ceilings.
#include <memory>

#include "cli/commands.h"
#include "core/check.h"
#include "registry/registry.h"

#ifdef MEGASLIDE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gemm.h"
#include "cli/bench_cuda_attention.h"
#include "cli/bench_cuda_block.h"
#include "cli/bench_cuda_models.h"
#include "cli/bench_cuda_stream.h"
#include "cli/cuda_timing.h"
#include "core/aligned.h"
#include "core/rng.h"
#endif

namespace ms::cli {
namespace {

struct BenchCudaArgs {
  int64_t copy_mib = 1024;  // bytes per copy measurement
  int repeats = 10;
  std::vector<int64_t> block_grid{8, 32, 32};   // token grid of the block benchmark; a zero skips it
  std::vector<int64_t> stream_grid{8, 32, 32};  // token grid of the streamed-step benchmark; a zero skips it
  int64_t stream_layers = 8;
  std::string stream_attention = "dense";                             // the streamed-step benchmark's self-attention
  std::vector<int64_t> attention_tokens{4096, 16384, 32768, 131072};  // attention benchmark; 0 skips it
  int64_t attention_dense_max = 32768;                                // dense attention up to this many tokens
  std::vector<int64_t> vae_clip{5, 480, 832};  // frames, height, width of the VAE benchmark; a zero skips it
  int64_t t5_tokens = 50;                      // prompt length of the text-encoder benchmark; 0 skips it
  bool json = false;
};

#ifdef MEGASLIDE_HAVE_CUDA

// bf16 GEMM rate (FLOP/s) of C [M,N] = A [M,K] B [K,N] with random operands.
double gemm_rate(cuda::GemmContext& ctx, int64_t M, int64_t N, int64_t K, int repeats, cudaStream_t stream) {
  uint16_t *A, *B, *C;
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&A), size_t(M * K) * 2));
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&B), size_t(K * N) * 2));
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&C), size_t(M * N) * 2));
  fill_random_bf16(A, M * K, stream);
  fill_random_bf16(B, K * N, stream);
  const double s = time_events(stream, repeats,
                               [&] { ctx.gemm<uint16_t>(false, false, M, N, K, 1.f, A, K, B, N, 0.f, C, N, stream); });
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  return 2.0 * double(M) * double(N) * double(K) / s;
}

// fp32 GEMM rate (FLOP/s) of a square n x n x n product with random operands (the VAE's convolutions run it).
double gemm_rate_f32(cuda::GemmContext& ctx, int64_t n, int repeats, cudaStream_t stream) {
  Rng rng(5);
  std::vector<float> host(size_t(n * n));
  for (float& v : host) v = float(rng.normal());
  float *A, *C;
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&A), host.size() * 4));
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&C), host.size() * 4));
  MS_CUDA_CHECK(cudaMemcpyAsync(A, host.data(), host.size() * 4, cudaMemcpyHostToDevice, stream));
  const double s =
      time_events(stream, repeats, [&] { ctx.gemm<float>(false, false, n, n, n, 1.f, A, n, A, n, 0.f, C, n, stream); });
  cudaFree(A);
  cudaFree(C);
  return 2.0 * double(n) * double(n) * double(n) / s;
}

void print_block(const nlohmann::json& b) {
  std::printf("  block (Wan-14B shapes, %lld tokens): forward %.2f ms, backward %.2f ms (recomputes the forward)\n",
              static_cast<long long>(b["tokens"].get<int64_t>()), 1e3 * b["forward_s"].get<double>(),
              1e3 * b["backward_s"].get<double>());
  std::printf(
      "    MFU %.3f (GEMM FLOPs of forward + backward over the step, against square 8192); attention "
      "%.2f ms of the step; GEMMs outside it at %.3f of that rate\n",
      b["mfu"].get<double>(), 1e3 * b["attention_step_s"].get<double>(),
      b["gemm_fraction_outside_attention"].get<double>());
}

void print_attention(const nlohmann::json& rows, double gemm_tflops) {
  std::printf(
      "  self-attention, 40 heads of 128, window 3x3x3 (forward, backward; TFLOP/s and its share of square 8192):\n");
  for (const auto& t : rows)
    std::printf("    %-9s %7lld tokens: %9.2f ms %9.2f ms; forward %6.1f TFLOP/s (%.3f), step %6.1f TFLOP/s (%.3f)\n",
                t["type"].get<std::string>().c_str(), static_cast<long long>(t["tokens"].get<int64_t>()),
                1e3 * t["forward_s"].get<double>(), 1e3 * t["backward_s"].get<double>(),
                t["forward_tflops"].get<double>(), t["forward_tflops"].get<double>() / gemm_tflops,
                t["step_tflops"].get<double>(), t["step_tflops"].get<double>() / gemm_tflops);
}

void print_stream(const nlohmann::json& s, double pinned_h2d_gbps) {
  const double gib = double(1 << 30);
  std::printf(
      "  streamed step (Wan-14B blocks x %lld, %lld tokens; weights %.2f GiB in host memory; arena %.2f GiB, plan "
      "%.2f GiB, budget %.2f GiB; device memory in use %.2f GiB)\n",
      static_cast<long long>(s["layers"].get<int64_t>()), static_cast<long long>(s["tokens"].get<int64_t>()),
      s["weights_bytes"].get<double>() / gib, s["arena_bytes"].get<double>() / gib, s["plan_bytes"].get<double>() / gib,
      s["budget_bytes"].get<double>() / gib, s["device_used_bytes"].get<double>() / gib);
  std::printf("    prefetch on: %.1f ms, MFU %.3f; serialized: %.1f ms, MFU %.3f; copies alone %.1f ms\n",
              1e3 * s["step_s"].get<double>(), s["mfu"].get<double>(), 1e3 * s["serialized_step_s"].get<double>(),
              s["serialized_mfu"].get<double>(), 1e3 * s["copies_only_s"].get<double>());
  std::printf("    transfer time hidden %.3f; H2D in the copies-only step %.1f GB/s, %.3f of the pinned ceiling\n",
              s["transfer_hidden"].get<double>(), s["h2d_gbps_copies_only"].get<double>(),
              s["h2d_gbps_copies_only"].get<double>() / pinned_h2d_gbps);
}

void print_vae(const nlohmann::json& v) {
  std::printf(
      "  VAE (Wan2.1's, fp32), %lld x %lld x %lld pixels: encode %.3f s (%.1f TFLOP/s, %.3f of fp32 GEMM), decode "
      "%.3f s (%.1f TFLOP/s, %.3f); device memory %.2f GiB\n",
      static_cast<long long>(v["frames"].get<int64_t>()), static_cast<long long>(v["height"].get<int64_t>()),
      static_cast<long long>(v["width"].get<int64_t>()), v["encode_s"].get<double>(), v["encode_tflops"].get<double>(),
      v["encode_fraction_of_fp32_gemm"].get<double>(), v["decode_s"].get<double>(), v["decode_tflops"].get<double>(),
      v["decode_fraction_of_fp32_gemm"].get<double>(), v["device_used_bytes"].get<double>() / double(1 << 30));
}

void print_t5(const nlohmann::json& t) {
  std::printf(
      "  text encoder (umT5-XXL, bf16), %lld tokens: %.1f ms (%.1f TFLOP/s, %.3f of bf16 GEMM); upload %.1f s\n",
      static_cast<long long>(t["tokens"].get<int64_t>()), 1e3 * t["encode_s"].get<double>(), t["tflops"].get<double>(),
      t["fraction_of_bf16_gemm"].get<double>(), t["upload_s"].get<double>());
}

void bench_cuda(const BenchCudaArgs& a) {
  const cuda::DeviceInfo dev = cuda::device_info();
  const size_t bytes = size_t(a.copy_mib) << 20;
  MS_CHECK(a.copy_mib > 0 && a.repeats > 0, "--copy-mib and --repeats must be positive");
  // With --json, one flushed line per measurement as soon as it is taken: a run cut by a timeout keeps what it
  // measured. r gathers them for the table printed at the end otherwise.
  nlohmann::json r{{"device", dev.name},
                   {"multiprocessors", dev.multiprocessors},
                   {"memory_bytes", dev.memory_bytes},
                   {"copy_bytes", bytes}};
  auto emit = [&](const char* measure, nlohmann::json line) {
    if (!a.json) return;
    line["measure"] = measure;
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  };
  emit("device", r);
  auto copy_rate = [&](const char* key, double moved, double seconds) {
    r[key] = moved / seconds / 1e9;
    emit("copy", {{"what", key}, {"gbps", r[key]}, {"bytes", bytes}});
  };
  cudaStream_t up, down;
  MS_CUDA_CHECK(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking));
  MS_CUDA_CHECK(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking));
  void *host_a, *host_b, *dev_a, *dev_b;
  MS_CUDA_CHECK(cudaHostAlloc(&host_a, bytes, cudaHostAllocDefault));
  MS_CUDA_CHECK(cudaHostAlloc(&host_b, bytes, cudaHostAllocDefault));
  MS_CUDA_CHECK(cudaMalloc(&dev_a, bytes));
  MS_CUDA_CHECK(cudaMalloc(&dev_b, bytes));
  // The pinned-copy ceiling: one cudaMemcpyAsync per direction, and both directions at once.
  copy_rate("pinned_h2d_gbps", double(bytes), time_events(up, a.repeats, [&] {
              MS_CUDA_CHECK(cudaMemcpyAsync(dev_a, host_a, bytes, cudaMemcpyHostToDevice, up));
            }));
  copy_rate("pinned_d2h_gbps", double(bytes), time_events(down, a.repeats, [&] {
              MS_CUDA_CHECK(cudaMemcpyAsync(host_b, dev_b, bytes, cudaMemcpyDeviceToHost, down));
            }));
  copy_rate("pinned_both_gbps", 2.0 * double(bytes), time_host(a.repeats, [&] {
              MS_CUDA_CHECK(cudaMemcpyAsync(dev_a, host_a, bytes, cudaMemcpyHostToDevice, up));
              MS_CUDA_CHECK(cudaMemcpyAsync(host_b, dev_b, bytes, cudaMemcpyDeviceToHost, down));
              MS_CUDA_CHECK(cudaDeviceSynchronize());
            }));
  copy_rate("device_copy_gbps", 2.0 * double(bytes), time_events(up, a.repeats, [&] {
              MS_CUDA_CHECK(cudaMemcpyAsync(dev_b, dev_a, bytes, cudaMemcpyDeviceToDevice, up));
            }));
  // The runtime's path: pools from page_alloc pinned in place, stage-sized copies on the backend's streams.
  {
    AlignedBuffer<uint16_t> weights(bytes / 2);  // before the backend, which unpins them when it goes
    AlignedBuffer<float> grads(bytes / 4);
    CudaBackend be;
    be.pin_host(weights.data(), bytes);
    be.pin_host(grads.data(), bytes);
    const int h2d_stream = be.create_stream("h2d", StreamKind::device);
    const int d2h_stream = be.create_stream("d2h", StreamKind::device);
    const int64_t stage = 64 << 20, n_up = int64_t(bytes / 2);  // 128 MiB stages of bf16
    auto upload = [&] {
      for (int64_t off = 0; off < n_up; off += stage)
        be.upload_weights(h2d_stream, static_cast<uint16_t*>(dev_a) + off, weights.data() + off,
                          std::min(stage, n_up - off), "weights");
    };
    auto download = [&] {
      for (size_t off = 0; off < bytes; off += size_t(stage) * 2)
        be.copy_d2h(d2h_stream, reinterpret_cast<char*>(grads.data()) + off, static_cast<char*>(dev_b) + off,
                    std::min(size_t(stage) * 2, bytes - off), "grads");
    };
    copy_rate("runtime_h2d_gbps", double(bytes), time_host(a.repeats, [&] { upload(), be.sync_all(); }));
    copy_rate("runtime_d2h_gbps", double(bytes), time_host(a.repeats, [&] { download(), be.sync_all(); }));
    copy_rate("runtime_both_gbps", 2.0 * double(bytes),
              time_host(a.repeats, [&] { upload(), download(), be.sync_all(); }));
  }
  cudaFreeHost(host_a);
  cudaFreeHost(host_b);
  cudaFree(dev_a);
  cudaFree(dev_b);
  cuda::GemmContext ctx;
  struct Shape {
    const char* what;
    int64_t M, N, K;
  };
  const Shape shapes[] = {{"square 8192", 8192, 8192, 8192},
                          {"Wan-14B q/k/v/o, 32760 tokens", 32760, 5120, 5120},
                          {"Wan-14B ffn.0, 32760 tokens", 32760, 13824, 5120},
                          {"Wan-14B ffn.2, 32760 tokens", 32760, 5120, 13824}};
  for (const Shape& s : shapes) {
    r["gemm_tflops"][s.what] = gemm_rate(ctx, s.M, s.N, s.K, a.repeats, up) / 1e12;
    emit("gemm", {{"shape", s.what}, {"M", s.M}, {"N", s.N}, {"K", s.K}, {"tflops", r["gemm_tflops"][s.what]}});
  }
  const double ceiling = r["gemm_tflops"][shapes[0].what].get<double>() * 1e12;  // the square GEMM's FLOP/s
  const double fp32_ceiling = gemm_rate_f32(ctx, 4096, a.repeats, up);
  r["fp32_gemm_tflops"] = fp32_ceiling / 1e12;
  emit("gemm", {{"shape", "fp32 square 4096"}, {"M", 4096}, {"N", 4096}, {"K", 4096}, {"tflops", fp32_ceiling / 1e12}});
  if (std::all_of(a.block_grid.begin(), a.block_grid.end(), [](int64_t v) { return v > 0; })) {
    // at most 3 repeats
    nlohmann::json b =
        bench_cuda_block(ctx, {a.block_grid[0], a.block_grid[1], a.block_grid[2]}, std::min(a.repeats, 3), up);
    const double step = b["step_s"].get<double>();
    const double gemm = b["gemm_flops"].get<double>(), outside = step - b["attention_step_s"].get<double>();
    b["mfu"] = 3 * gemm / step / ceiling;  // model GEMM FLOPs (forward + backward = 3 forwards) per step time
    b["gemm_fraction_outside_attention"] = outside > 0 ? 4 * gemm / outside / ceiling : 0.0;  // what runs: 4x
    r["block"] = b;
    emit("block", b);
  }
  if (!a.attention_tokens.empty() && a.attention_tokens.front() > 0)
    r["attention"] = bench_cuda_attention(ctx, a.attention_tokens, a.attention_dense_max, std::min(a.repeats, 3), up,
                                          [&](const nlohmann::json& row) {
                                            nlohmann::json line = row;
                                            line["gemm_tflops"] = ceiling / 1e12;
                                            emit("attention", line);
                                          });
  if (std::all_of(a.stream_grid.begin(), a.stream_grid.end(), [](int64_t v) { return v > 0; })) {
    const StreamBenchShape shape{{a.stream_grid[0], a.stream_grid[1], a.stream_grid[2]},
                                 a.stream_layers,
                                 std::min(a.repeats, 3),
                                 parse_name<AttentionType>(a.stream_attention, "--stream-attention")};
    r["stream"] = bench_cuda_stream(shape, ceiling, dev.name);
    nlohmann::json line = r["stream"];
    line["pinned_h2d_gbps"] = r["pinned_h2d_gbps"];
    line["gemm_tflops"] = ceiling / 1e12;
    emit("stream", line);
  }
  if (std::all_of(a.vae_clip.begin(), a.vae_clip.end(), [](int64_t v) { return v > 0; })) {
    r["vae"] = bench_cuda_vae(a.vae_clip[0], a.vae_clip[1], a.vae_clip[2], std::min(a.repeats, 2), fp32_ceiling);
    emit("vae", r["vae"]);
  }
  if (a.t5_tokens > 0) {
    r["t5"] = bench_cuda_t5(a.t5_tokens, std::min(a.repeats, 3), ceiling);
    emit("t5", r["t5"]);
  }
  cudaStreamDestroy(up);
  cudaStreamDestroy(down);
  emit("done", nlohmann::json::object());
  if (a.json) return;
  std::printf("bench cuda: %s, %d SMs, %.1f GiB; copies of %lld MiB, median of %d\n", dev.name.c_str(),
              dev.multiprocessors, double(dev.memory_bytes) / double(1 << 30), static_cast<long long>(a.copy_mib),
              a.repeats);
  auto row = [&](const char* what, const char* key, const char* ceiling) {
    std::printf("  %-28s %8.1f GB/s", what, r[key].get<double>());
    if (ceiling) std::printf("  %.3f of the pinned ceiling", r[key].get<double>() / r[ceiling].get<double>());
    std::printf("\n");
  };
  row("pinned H2D (ceiling)", "pinned_h2d_gbps", nullptr);
  row("pinned D2H (ceiling)", "pinned_d2h_gbps", nullptr);
  row("pinned both at once", "pinned_both_gbps", nullptr);
  row("runtime H2D (weights)", "runtime_h2d_gbps", "pinned_h2d_gbps");
  row("runtime D2H (grads)", "runtime_d2h_gbps", "pinned_d2h_gbps");
  row("runtime both at once", "runtime_both_gbps", "pinned_both_gbps");
  row("device-to-device (r+w)", "device_copy_gbps", nullptr);
  for (const Shape& s : shapes)
    std::printf("  bf16 GEMM %-30s %7.1f TFLOP/s\n", s.what, r["gemm_tflops"][s.what].get<double>());
  std::printf("  fp32 GEMM %-30s %7.1f TFLOP/s\n", "square 4096", r["fp32_gemm_tflops"].get<double>());
  if (r.contains("attention")) print_attention(r["attention"], r["gemm_tflops"][shapes[0].what].get<double>());
  if (r.contains("block")) print_block(r["block"]);
  if (r.contains("stream")) print_stream(r["stream"], r["pinned_h2d_gbps"].get<double>());
  if (r.contains("vae")) print_vae(r["vae"]);
  if (r.contains("t5")) print_t5(r["t5"]);
}
#else

void bench_cuda(const BenchCudaArgs&) {
  MS_FAIL("bench cuda measures a GPU: ", backend_unavailable(BackendKind::cuda));
}

#endif

}  // namespace

void add_bench_cuda(CLI::App& bench) {
  auto a = std::make_shared<BenchCudaArgs>();
  CLI::App* cmd = bench.add_subcommand("cuda", "GPU ceilings (pinned copies, HBM, bf16 GEMM) and the runtime's copies");
  cmd->add_option("--copy-mib", a->copy_mib, "MiB per copy measurement")->capture_default_str();
  cmd->add_option("--repeats", a->repeats, "Timed repeats (the median is reported)")->capture_default_str();
  cmd->add_option("--block-grid", a->block_grid,
                  "Token grid (f h w) of the one-block benchmark at Wan2.1-14B shapes; 0 0 0 skips it")
      ->expected(3)
      ->capture_default_str();
  cmd->add_option("--stream-grid", a->stream_grid,
                  "Token grid (f h w) of the streamed-step benchmark (Wan2.1-14B blocks); 0 0 0 skips it")
      ->expected(3)
      ->capture_default_str();
  cmd->add_option("--stream-layers", a->stream_layers, "Blocks of the streamed-step benchmark's model")
      ->capture_default_str();
  cmd->add_option("--stream-attention", a->stream_attention,
                  "Self-attention of the streamed-step benchmark's blocks: dense, window, dsa or dsa_fixed")
      ->check(CLI::IsMember({"dense", "window", "dsa", "dsa_fixed"}))
      ->capture_default_str();
  cmd->add_option("--attention-tokens", a->attention_tokens,
                  "Token counts of the attention benchmark (Wan2.1-14B heads; multiples of 1024); 0 skips it")
      ->capture_default_str();
  cmd->add_option("--attention-dense-max", a->attention_dense_max,
                  "Dense attention runs up to this many tokens (quadratic cost); the local types at every count")
      ->capture_default_str();
  cmd->add_option("--vae-clip", a->vae_clip,
                  "Clip (frames height width) the VAE benchmark encodes and decodes (Wan2.1's, random weights); 0 0 0 "
                  "skips it")
      ->expected(3)
      ->capture_default_str();
  cmd->add_option("--t5-tokens", a->t5_tokens,
                  "Prompt length of the text-encoder benchmark (umT5-XXL, random weights: 11 GB of host memory); 0 "
                  "skips it")
      ->capture_default_str();
  cmd->add_flag("--json", a->json,
                "Print one JSON object per line, one per measurement as it is taken (its \"measure\": device, copy, "
                "gemm, block, attention, stream, vae, t5, then done)");
  cmd->callback([a] { bench_cuda(*a); });
}

}  // namespace ms::cli
