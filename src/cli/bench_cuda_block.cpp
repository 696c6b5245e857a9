#include "cli/bench_cuda_block.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stages.h"
#include "cli/cuda_timing.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/weights.h"
#include "model/workspace.h"
#include "runtime/reduction_scratch.h"

namespace ms::cli {
namespace {

// Every buffer the benchmark takes, laid out in one cudaMalloc by visit_buffers (model/workspace.h).
struct Buffers {
  cuda::GpuBlockActs acts;
  cuda::GpuBlockGrads grads;
  uint16_t *weights, *x, *ctx, *dout, *out, *dx, *dctx;
  float *wgrads, *e0, *de0, *scratch;
};

}  // namespace

void fill_random_bf16(uint16_t* device, int64_t n, cudaStream_t stream) {
  Rng rng(7);
  std::vector<uint16_t> tile(size_t(1) << 22);
  for (auto& x : tile) x = f32_to_bf16(float(rng.normal()));
  fill_tiled_bf16(device, n, tile, stream);
}

void fill_tiled_bf16(uint16_t* device, int64_t n, const std::vector<uint16_t>& tile, cudaStream_t stream) {
  for (int64_t off = 0; off < n; off += int64_t(tile.size()))
    MS_CUDA_CHECK(cudaMemcpyAsync(device + off, tile.data(),
                                  size_t(std::min<int64_t>(n - off, int64_t(tile.size()))) * 2, cudaMemcpyHostToDevice,
                                  stream));
  MS_CUDA_CHECK(cudaStreamSynchronize(stream));  // the tile is pageable and may go when this returns
}

nlohmann::json bench_cuda_block(cuda::GemmContext& gemm, const std::array<int64_t, 3>& grid, int repeats,
                                cudaStream_t stream) {
  const ModelConfig c = preset_config("wan2.1-14b");
  const auto& ps = c.patch_size;
  const ModelDims d = ModelDims::make(c, 1, grid[0] * ps[0], grid[1] * ps[1], grid[2] * ps[2], c.text_len);
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt, scratch_n = cuda::block_reduction_scratch(c, d);
  int64_t P = 0;
  BlockW<uint16_t*> counted{};
  visit_block(c, 0, counted, [&](const std::string&, const Shape& s, auto&) { P += numel(s); });
  auto visit = [&](Buffers& b, auto&& f) {
    visit_block_acts(c, d, b.acts, f, cuda::CudaOps::kFusedNormModulate);
    visit_block_grads(c, d, b.grads, f);
    for (auto [p, n] : {std::pair{&b.weights, P},
                        {&b.x, N * D},
                        {&b.ctx, Nc * D},
                        {&b.dout, N * D},
                        {&b.out, N * D},
                        {&b.dx, N * D},
                        {&b.dctx, Nc * D}})
      f(n, *p);
    for (auto [p, n] : {std::pair{&b.wgrads, P}, {&b.e0, 6 * D}, {&b.de0, 6 * D}, {&b.scratch, scratch_n}}) f(n, *p);
  };
  void* base = nullptr;
  MS_CUDA_CHECK(cudaMalloc(&base, size_t(workspace_bytes<Buffers>(visit, 256))));
  const std::unique_ptr<void, cudaError_t (*)(void*)> held(base, cudaFree);
  const Buffers in = bind_workspace<Buffers>(base, visit, 256);
  const cuda::GpuBlockActs& acts = in.acts;
  const cuda::GpuBlockGrads& grads = in.grads;
  for (auto [p, n] : {std::pair{in.weights, P}, {in.x, N * D}, {in.ctx, Nc * D}, {in.dout, N * D}})
    fill_random_bf16(p, n, stream);
  std::vector<float> e0(size_t(6 * D));
  Rng rng(11);
  for (float& v : e0) v = float(0.1 * rng.normal());
  MS_CUDA_CHECK(cudaMemcpyAsync(in.e0, e0.data(), e0.size() * 4, cudaMemcpyHostToDevice, stream));
  MS_CUDA_CHECK(cudaMemsetAsync(in.wgrads, 0, size_t(P) * 4, stream));
  MS_CUDA_CHECK(cudaMemsetAsync(in.de0, 0, size_t(6 * D) * 4, stream));
  MS_CUDA_CHECK(cudaMemsetAsync(in.dctx, 0, size_t(Nc * D) * 2, stream));
  MS_CUDA_CHECK(cudaStreamSynchronize(stream));  // e0 is pageable

  cuda::CudaOps ops{gemm, stream, in.scratch, scratch_n};
  const BlockW<const uint16_t*> w = bind_block<const uint16_t>(c, in.weights);
  const double fwd =
      time_events(stream, repeats, [&] { cuda::block_forward(ops, c, d, 0, w, in.x, in.e0, in.ctx, acts, in.out); });
  const double bwd = time_events(stream, repeats, [&] {
    cuda::block_backward(ops, c, d, 0, w, in.x, in.e0, in.ctx, acts, grads, in.dout, in.dx, in.de0, in.dctx,
                         bind_block<float>(c, in.wgrads));
  });
  // The attention kernels alone on the block's own q, k, v (left by the last forward).
  const AttentionParams<uint16_t, float> self{
      {acts.q, acts.k, acts.v, acts.attn, acts.attn_lse, in.dout, grads.c, grads.a, grads.d},
      {d.B, d.L, d.L, c.num_heads, c.head_dim()}},
      cross{{acts.qc, acts.kc, acts.vc, acts.yc, acts.yc_lse, in.dout, grads.b, grads.kc, grads.vc},
            {d.B, d.L, d.Lt, c.num_heads, c.head_dim()}};
  const double attn_fwd = time_events(stream, repeats, [&] {
    ops.attention_forward(self);
    ops.attention_forward(cross);
  });
  const double attn_bwd = time_events(stream, repeats, [&] {
    ops.attention_backward(self);
    ops.attention_backward(cross);
  });
  const double gemm_flops = 2.0 * double(N) * double(6 * D * D + 2 * D * c.ffn_dim) + 2.0 * double(Nc) * 2 * D * D;
  const double attention_flops = 4.0 * double(N) * double(d.L + d.Lt) * double(D);
  return {{"tokens", N},
          {"grid", {grid[0], grid[1], grid[2]}},
          {"forward_s", fwd},
          {"backward_s", bwd},
          {"step_s", fwd + bwd},
          {"attention_step_s", 2 * attn_fwd + attn_bwd},
          {"gemm_flops", gemm_flops},
          {"attention_flops", attention_flops}};
}

}  // namespace ms::cli
