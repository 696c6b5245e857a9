#include "cli/bench_cuda_attention.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_ops.h"
#include "cli/bench_cuda_block.h"
#include "cli/cuda_timing.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/attention_core.h"
#include "model/config.h"
#include "model/flops.h"

namespace ms::cli {
namespace {

std::array<int64_t, 3> grid_of(int64_t L) {
  // Wan2.1's 81 frames at 480 x 832 and at 720 x 1280: 21 latent frames of 30 x 52 and 45 x 80 tokens.
  if (L == 32760) return {21, 30, 52};
  if (L == 75600) return {21, 45, 80};
  MS_CHECK(L > 0 && L % 1024 == 0, "bench cuda: attention token counts must be multiples of 1024 (or Wan's 32760 or ",
           "75600), not ", L);
  return L <= 32768 ? std::array<int64_t, 3>{L / 1024, 32, 32} : std::array<int64_t, 3>{L / 4096, 64, 64};
}

// Offsets uniform in [-range, range] per axis (the model's offset_range bounds them the same way), in tiles.
void fill_offsets(uint16_t* device, int64_t n, const std::array<double, 3>& range, cudaStream_t stream) {
  Rng rng(13);
  std::vector<uint16_t> tile(size_t(3) << 20);
  for (size_t i = 0; i < tile.size(); ++i) tile[i] = f32_to_bf16(float(range[i % 3] * (2 * rng.uniform() - 1)));
  fill_tiled_bf16(device, n, tile, stream);
}

}  // namespace

nlohmann::json bench_cuda_attention(cuda::GemmContext& gemm, const std::vector<int64_t>& tokens, int64_t dense_max,
                                    int repeats, cudaStream_t stream,
                                    const std::function<void(const nlohmann::json&)>& measured) {
  const ModelConfig c = preset_config("wan2.1-14b");
  const std::array<int64_t, 3> window = ModelConfig{}.attention.window;
  nlohmann::json out = nlohmann::json::array();
  for (int64_t L : tokens) {
    const std::array<int64_t, 3> g = grid_of(L);
    const VideoAttentionDims vd{.B = 1, .T = g[0], .H = g[1], .W = g[2], .nh = c.num_heads, .d = c.head_dim()};
    const AttentionDims a{.B = 1, .Lq = L, .Lk = L, .nh = c.num_heads, .d = c.head_dim()};
    const DsaArgs dsa{.window = window, .groups = c.num_heads};
    const int64_t n = L * c.dim, noff = L * dsa.groups * dsa.P() * 3;
    const int64_t scratch_floats = std::max(cuda::attention_backward_scratch(a), cuda::dsa_backward_scratch(vd, dsa));
    // q, k, v, out, dout, dq, dk, dv, offsets, doffsets bf16; lse and the backward's scratch fp32
    void* base = nullptr;
    MS_CUDA_CHECK(cudaMalloc(&base, size_t(8 * n + 2 * noff) * 2 + size_t(a.nh * L + scratch_floats) * 4));
    const std::unique_ptr<void, cudaError_t (*)(void*)> held(base, cudaFree);
    uint16_t* t[8];
    for (int i = 0; i < 8; ++i) t[i] = static_cast<uint16_t*>(base) + i * n;
    uint16_t *off = t[7] + n, *doff = off + noff;
    float* lse = reinterpret_cast<float*>(doff + noff);
    float* scratch = lse + a.nh * L;
    for (int i : {0, 1, 2, 4}) fill_random_bf16(t[i], n, stream);
    fill_offsets(off, noff, c.attention.offset_range, stream);
    MS_CUDA_CHECK(cudaMemsetAsync(t[5], 0, size_t(3 * n) * 2, stream));
    MS_CUDA_CHECK(cudaMemsetAsync(doff, 0, size_t(noff) * 2, stream));
    // dsa: on tensor cores; dsa_staged: the staged kernels instead, old beside new; dsa_unstaged: dsa_staged with no
    // shared-memory staging (every corner read from global memory), to show what the staging of the K/V halo buys. DSA
    // first: a run cut short keeps the rows that matter most.
    for (const std::string type : {"dsa", "dsa_staged", "dsa_fixed", "dsa_unstaged", "window", "dense"}) {
      if (type == "dense" && L > dense_max) continue;
      const bool variant = type == "dsa_staged" || type == "dsa_unstaged";
      const AttentionSpec spec{.type = parse_name<AttentionType>(variant ? "dsa" : type, "type"),
                               .dims = vd,
                               .window = window,
                               .shifted = true,
                               .groups = dsa.groups};
      cuda::CudaOps ops{gemm,    stream, scratch, scratch_floats, type == "dsa_unstaged" ? 0 : cuda::kDsaHaloRows,
                        !variant};
      const AttentionTensors<uint16_t, float> tensors{
          .q = t[0], .k = t[1], .v = t[2], .out = t[3], .lse = lse, .dout = t[4], .dq = t[5], .dk = t[6], .dv = t[7]};
      auto forward = [&] { attention_forward(ops, spec, tensors, off); };
      auto backward = [&] { attention_backward(ops, spec, tensors, off, doff); };
      const double fwd = time_events(stream, repeats, forward), bwd = time_events(stream, repeats, backward);
      AttentionConfig counted;
      counted.type = spec.type;
      counted.window = window;
      const double flops = double(L) * self_attention_forward_flops(counted, g) * double(c.dim);
      // The memory floor: each tensor read or written once (bf16 rows, fp32 lse, DSA's offsets and their gradients).
      const bool offsets = spec.type == AttentionType::dsa;
      const double rows = double(n) * 2, lse_bytes = double(a.nh * L) * 4, off_bytes = offsets ? double(noff) * 2 : 0;
      const double fwd_bytes = 4 * rows + lse_bytes + off_bytes, bwd_bytes = 8 * rows + lse_bytes + 2 * off_bytes;
      out.push_back({{"type", type},
                     {"tokens", L},
                     {"grid", g},
                     {"forward_s", fwd},
                     {"backward_s", bwd},
                     {"forward_tflops", flops / fwd / 1e12},
                     {"step_tflops", 3.5 * flops / (fwd + bwd) / 1e12},
                     {"forward_floor_bytes", fwd_bytes},
                     {"backward_floor_bytes", bwd_bytes},
                     {"floor_gbps", (fwd_bytes + bwd_bytes) / (fwd + bwd) / 1e9}});
      measured(out.back());
    }
  }
  return out;
}

}  // namespace ms::cli
