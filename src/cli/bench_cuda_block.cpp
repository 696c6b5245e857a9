#include "cli/bench_cuda_block.h"

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_stages.h"
#include "cli/cuda_timing.h"
#include "core/check.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "model/config.h"
#include "model/weights.h"
#include "ops/reduction_scratch.h"

namespace ms::cli {
namespace {

// One cudaMalloc handed out in 256-byte aligned pieces.
class DeviceBump {
 public:
  explicit DeviceBump(size_t bytes) : size_(bytes) { MS_CUDA_CHECK(cudaMalloc(&base_, bytes)); }
  ~DeviceBump() { cudaFree(base_); }
  DeviceBump(const DeviceBump&) = delete;
  DeviceBump& operator=(const DeviceBump&) = delete;
  template <class T>
  T* take(int64_t n) {
    const size_t at = used_;
    used_ += (sizeof(T) * size_t(n) + 255) / 256 * 256;
    MS_CHECK(used_ <= size_, "bench cuda block: the buffer plan is short by ", used_ - size_, " bytes");
    return reinterpret_cast<T*>(static_cast<char*>(base_) + at);
  }

 private:
  void* base_ = nullptr;
  size_t size_, used_ = 0;
};

template <class T>
using Pointee = std::remove_pointer_t<std::remove_reference_t<T>>;

// Bytes of every buffer the benchmark takes, each rounded up to 256 (what DeviceBump hands out).
struct Sizer {
  size_t bytes = 0;
  template <class T>
  T* take(int64_t n) {
    bytes += (sizeof(T) * size_t(n) + 255) / 256 * 256;
    return nullptr;
  }
};

}  // namespace

void fill_random_bf16(uint16_t* device, int64_t n) {
  Rng rng(7);
  std::vector<uint16_t> tile(size_t(1) << 22);
  for (auto& x : tile) x = f32_to_bf16(float(rng.normal()));
  for (int64_t off = 0; off < n; off += int64_t(tile.size()))
    MS_CUDA_CHECK(cudaMemcpy(device + off, tile.data(), size_t(std::min<int64_t>(n - off, int64_t(tile.size()))) * 2,
                             cudaMemcpyHostToDevice));
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
  cuda::GpuBlockActs acts{};
  cuda::GpuBlockGrads grads{};
  struct Inputs {
    uint16_t *weights, *x, *ctx, *dout, *out, *dx, *dctx;
    float *grads, *e0, *de0, *scratch;
  } in{};
  auto carve = [&](auto& pool) {  // the same sequence of takes sizes the buffer and then carves it
    auto field = [&](int64_t n, auto& f) { f = pool.template take<Pointee<decltype(f)>>(n); };
    visit_block_acts(c, d, acts, field, /*fused=*/true);
    visit_block_grads(c, d, grads, field);
    for (auto [p, n] : {std::pair{&in.weights, P},
                        {&in.x, N * D},
                        {&in.ctx, Nc * D},
                        {&in.dout, N * D},
                        {&in.out, N * D},
                        {&in.dx, N * D},
                        {&in.dctx, Nc * D}})
      *p = pool.template take<uint16_t>(n);
    for (auto [p, n] : {std::pair{&in.grads, P}, {&in.e0, 6 * D}, {&in.de0, 6 * D}, {&in.scratch, scratch_n}})
      *p = pool.template take<float>(n);
  };
  Sizer sizer;
  carve(sizer);
  DeviceBump pool(sizer.bytes);
  carve(pool);
  for (auto [p, n] : {std::pair{in.weights, P}, {in.x, N * D}, {in.ctx, Nc * D}, {in.dout, N * D}})
    fill_random_bf16(p, n);
  std::vector<float> e0(size_t(6 * D));
  Rng rng(11);
  for (float& v : e0) v = float(0.1 * rng.normal());
  MS_CUDA_CHECK(cudaMemcpy(in.e0, e0.data(), e0.size() * 4, cudaMemcpyHostToDevice));
  MS_CUDA_CHECK(cudaMemset(in.grads, 0, size_t(P) * 4));
  MS_CUDA_CHECK(cudaMemset(in.de0, 0, size_t(6 * D) * 4));
  MS_CUDA_CHECK(cudaMemset(in.dctx, 0, size_t(Nc * D) * 2));

  cuda::CudaOps ops{gemm, stream, in.scratch, scratch_n};
  const BlockW<const uint16_t*> w = bind_block<const uint16_t>(c, in.weights);
  const double fwd =
      time_events(stream, repeats, [&] { cuda::block_forward(ops, c, d, 0, w, in.x, in.e0, in.ctx, acts, in.out); });
  const double bwd = time_events(stream, repeats, [&] {
    cuda::block_backward(ops, c, d, 0, w, in.x, in.e0, in.ctx, acts, grads, in.dout, in.dx, in.de0, in.dctx,
                         bind_block<float>(c, in.grads));
  });
  // The attention kernels alone on the block's own q, k, v (left by the last forward).
  const cpu::AttentionDims self{d.B, d.L, d.L, c.num_heads, c.head_dim()},
      cross{d.B, d.L, d.Lt, c.num_heads, c.head_dim()};
  const double attn_fwd = time_events(stream, repeats, [&] {
    ops.attention_forward(acts.q, acts.k, acts.v, acts.attn, acts.attn_lse, self);
    ops.attention_forward(acts.qc, acts.kc, acts.vc, acts.yc, acts.yc_lse, cross);
  });
  const double attn_bwd = time_events(stream, repeats, [&] {
    ops.attention_backward(acts.q, acts.k, acts.v, acts.attn, acts.attn_lse, in.dout, grads.c, grads.a, grads.d, self);
    ops.attention_backward(acts.qc, acts.kc, acts.vc, acts.yc, acts.yc_lse, in.dout, grads.b, grads.kc, grads.vc,
                           cross);
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
