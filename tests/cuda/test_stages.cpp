// The model's stages on the GPU (CudaOps: bf16 weights and activations, fp32 statistics, time path and
// gradients) against the same orchestration in float64 on the CPU kernels, with plain-loop GEMMs and attention
// (RefOps), on a small odd config: every output and every gradient. Skipped without a GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "backend/cuda/cuda_stages.h"
#include "backend/cuda/gemm.h"
#include "model/block_impl.h"
#include "model/head_impl.h"
#include "model/stem_impl.h"
#include "model/workspace.h"
#include "model_reference.h"
#include "runtime/reduction_scratch.h"
#include "small_config.h"

namespace ms::test {
namespace {

// Device buffers for a visited struct of pointers, every byte 0xff (NaN in bf16 and fp32) until written.
class DeviceFields {
 public:
  template <class T>
  T* take(int64_t n) {
    if (n == 0) return nullptr;
    void* p = nullptr;
    MS_CUDA_CHECK(cudaMalloc(&p, sizeof(T) * size_t(n)));
    MS_CUDA_CHECK(cudaMemset(p, 0xff, sizeof(T) * size_t(n)));
    held_.emplace_back(p, cudaFree);
    return static_cast<T*>(p);
  }

 private:
  std::vector<std::unique_ptr<void, cudaError_t (*)(void*)>> held_;
};

// Expects each parameter's gradient in got (fp32, the stage's layout) close to ref (DSA's offset network within
// kOffsetGradTol, model_reference.h).
template <class W, class Visit>
void expect_stage_grads(Visit&& visit, const std::vector<float>& got, const std::vector<double>& ref, double tol) {
  W fields{};
  int64_t offset = 0;
  visit(fields, [&](const std::string& name, const Shape& s, auto&) {
    const auto b = long(offset), e = long(offset + numel(s));
    expect_close("grad " + name, std::vector<float>(got.begin() + b, got.begin() + e),
                 std::vector<double>(ref.begin() + b, ref.begin() + e), in_offset_network(name) ? kOffsetGradTol : tol);
    offset += numel(s);
  });
}

// One block (odd: its windows are shifted) on the GPU against float64, every output and every gradient.
void check_block(const ModelConfig& c, const ModelDims& d) {
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt;
  auto visit = [&](auto& fields, auto&& f) { visit_block(c, 0, fields, f); };
  const Bf16Input w = stage_weights<BlockW<uint16_t*>>(visit, 201);
  const int64_t P = int64_t(w.bits.size());
  const Bf16Input x = random_bf16(size_t(N * D), 202), ctx = random_bf16(size_t(Nc * D), 203),
                  dout = random_bf16(size_t(N * D), 204), dctx0 = random_bf16(size_t(Nc * D), 205, kAccumulateScale);
  const std::vector<float> e0 = to_f32(randn(size_t(d.Bt() * 6 * D), 206, 0.5)),
                           de00 = to_f32(randn(size_t(d.Bt() * 6 * D), 207, kAccumulateScale)),
                           gw0 = to_f32(randn(size_t(P), 208, kAccumulateScale));
  const int layer = 1;

  // GPU
  DeviceBuffer<uint16_t> gw_bits(w.bits), gx(x.bits), gctx(ctx.bits), gdout(dout.bits), gdctx(dctx0.bits),
      gout(N * D, 0xffff), gdx(N * D, 0xffff);
  DeviceBuffer<float> ge0(e0), gde0(de00), ggrads(gw0), scratch(cuda::block_reduction_scratch(c, d), 0.f);
  DeviceFields fields;
  cuda::GpuBlockActs acts{};
  cuda::GpuBlockGrads grads{};
  auto alloc = [&](int64_t n, auto& field) { field = fields.take<Pointee<decltype(field)>>(n); };
  visit_block_acts(c, d, acts, alloc, cuda::CudaOps::kFusedNormModulate);
  visit_block_grads(c, d, grads, alloc);
  cuda::GemmContext gemm;
  cuda::CudaOps ops{gemm, nullptr, scratch.get(), cuda::block_reduction_scratch(c, d)};
  const BlockW<const uint16_t*> wd = bind_block<const uint16_t>(c, gw_bits.get());
  cuda::block_forward(ops, c, d, layer, wd, gx.get(), ge0.get(), gctx.get(), acts, gout.get());
  cuda::block_backward(ops, c, d, layer, wd, gx.get(), ge0.get(), gctx.get(), acts, grads, gdout.get(), gdx.get(),
                       gde0.get(), gdctx.get(), bind_block<float>(c, ggrads.get()));

  // float64 reference
  std::vector<std::vector<double>> held;
  BlockActs<double> ra{};
  BlockGrads<double> rg{};
  auto host = [&](int64_t n, auto& field) { field = held.emplace_back(size_t(n)).data(); };
  visit_block_acts(c, d, ra, host);
  visit_block_grads(c, d, rg, host);
  std::vector<double> out(size_t(N * D)), dx(size_t(N * D)), e0d(e0.begin(), e0.end()), de0(de00.begin(), de00.end()),
      dctx = dctx0.values, gw(gw0.begin(), gw0.end());
  RefOps ref;
  const BlockW<const double*> wr = bind_block<const double>(c, w.values.data());
  block_impl::block_forward(ref, c, d, layer, wr, x.values.data(), e0d.data(), ctx.values.data(), ra, out.data());
  block_impl::block_backward(ref, c, d, layer, wr, x.values.data(), e0d.data(), ctx.values.data(), ra, rg,
                             dout.values.data(), dx.data(), de0.data(), dctx.data(), bind_block<double>(c, gw.data()));

  // Every activation is rounded to bf16 (2^-9 relative) on the GPU, through about 20 ops forward and 30 backward.
  // The reference orchestration with each activation rounded to bf16 and each statistic and gradient to fp32 after
  // every op (a CPU emulation, run when this test was written) differs from the exact one by 4.6e-3 (out), 9.3e-3
  // (dx), 8.1e-3 (de0), 7.1e-3 (dctx) and 1.8e-3 to 1.5e-2 (the parameter gradients): 3e-2 and 6e-2 leave 4x
  // margin; a wrong or missing term gives errors of order 1.
  expect_close("out", widen(gout.read()), out, 3e-2);
  expect_close("dx", widen(gdx.read()), dx, c.attention.has_offsets() ? kOffsetDxTol : 6e-2);
  expect_close("de0", gde0.read(), de0, 6e-2);
  expect_close("dctx", widen(gdctx.read()), dctx, 6e-2);
  expect_stage_grads<BlockW<uint16_t*>>(visit, ggrads.read(), gw, 6e-2);
}

TEST(CudaStages, BlockForwardAndBackwardMatchFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = small_config();               // 2 heads of 12: RoPE parts of 2, 2 and 2 pairs
  check_block(c, ModelDims::make(c, 2, 3, 4, 6, 5));  // tokens 3 x 2 x 3 per sample
}

// Wan2.2's timesteps per latent frame: the modulation ops run on 3 rows of e0 per sample, 6 tokens each.
TEST(CudaStages, BlockForwardAndBackwardWithPerFrameTimesteps) {
  MS_REQUIRE_GPU();
  const ModelConfig c = small_config();
  check_block(c, ModelDims::make(c, 2, 3, 4, 6, 5, 3));
}

// Window attention through the flash kernels per cell: shifted (odd block), a window longer than the grid on one
// axis, cells cut at the borders.
TEST(CudaStages, WindowBlockMatchesFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = with_attention(small_config(), "window", {2, 4, 2});  // shift is the default
  check_block(c, ModelDims::make(c, 2, 5, 6, 10, 5));                         // tokens 5 x 3 x 5 per sample
}

// DSA through its offset network (random weights: offsets of order the range, many samples clamped at the borders),
// two heads in one offset group; dsa_fixed with an even window longer than the grid on one axis. The offsets are
// bf16 on the GPU: the offset network's gradients and dx get the tolerances of model_reference.h.
TEST(CudaStages, DsaBlockMatchesFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = with_attention(small_config(), "dsa", {3, 3, 3}, 1);
  check_block(c, ModelDims::make(c, 2, 5, 6, 10, 5));  // tokens 5 x 3 x 5 per sample
}

TEST(CudaStages, DsaFixedBlockMatchesFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = with_attention(small_config(), "dsa_fixed", {2, 4, 3});
  check_block(c, ModelDims::make(c, 2, 5, 6, 10, 5));
}

// The stem and the head: x0 and ctx (bf16 through one or two linears), e and e0 (the fp32 time path), the velocity,
// and every gradient, including the latents' and the context's. Errors: one or two bf16 roundings (about 3e-3
// each) where activations pass through bf16; fp32 arithmetic on the time path.
TEST(CudaStages, StemAndHeadMatchFloat64) {
  MS_REQUIRE_GPU();
  const ModelConfig c = small_config();
  const ModelDims d = ModelDims::make(c, 2, 3, 4, 6, 5);
  const int64_t N = d.N(), D = c.dim, B = d.B, Nt = d.B * d.Lt, Po = c.out_dim * c.patch_volume();
  const int64_t video_in = B * c.in_dim * d.F * d.H * d.W, video_out = B * c.out_dim * d.F * d.H * d.W;
  auto visit_s = [&](auto& fields, auto&& f) { visit_stem(c, fields, f); };
  auto visit_h = [&](auto& fields, auto&& f) { visit_head(c, fields, f); };
  const Bf16Input ws = stage_weights<StemW<uint16_t*>>(visit_s, 301),
                  wh = stage_weights<HeadW<uint16_t*>>(visit_h, 302);
  const std::vector<float> latents = to_f32(randn(size_t(video_in), 303)), t{137.f, 861.5f},
                           context = to_f32(randn(size_t(B * d.Lc * c.text_dim), 304)),
                           e_head = to_f32(randn(size_t(B * D), 305, 0.5)),
                           dvel = to_f32(randn(size_t(video_out), 306)), de_stem = to_f32(randn(size_t(B * D), 307)),
                           de0 = to_f32(randn(size_t(B * 6 * D), 308)),
                           de_head0 = to_f32(randn(size_t(B * D), 309, kAccumulateScale)),
                           gs0 = to_f32(randn(ws.bits.size(), 310, kAccumulateScale)),
                           gh0 = to_f32(randn(wh.bits.size(), 311, kAccumulateScale));
  const Bf16Input x_head = random_bf16(size_t(N * D), 312), dx0 = random_bf16(size_t(N * D), 313),
                  dctx = random_bf16(size_t(Nt * D), 314);
  auto wide = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };

  // GPU
  DeviceBuffer<uint16_t> gws(ws.bits), gwh(wh.bits), gx(x_head.bits), gdx0(dx0.bits), gdctx(dctx.bits),
      gdx(N * D, 0xffff), as(std::max(stem_scratch_act_numel(c, d), N * (Po + 2 * D)), 0xffff);
  DeviceBuffer<float> glat(latents), gt(t), gctx(context), geh(e_head), gdvel(dvel), gdes(de_stem), gde0(de0),
      gdeh(de_head0), ggs(gs0), ggh(gh0), gvel(video_out, -1.f), gdlat(video_in, -1.f),
      gdcontext(B * d.Lc * c.text_dim, -1.f), ss(std::max(stem_scratch_stat_numel(c, d), B * 2 * D), -1.f),
      scratch(cuda::block_reduction_scratch(c, d), 0.f);
  DeviceFields fields;
  cuda::GpuStemActs sa{};
  cuda::GpuHeadActs ha{};
  auto alloc = [&](int64_t n, auto& field) { field = fields.take<Pointee<decltype(field)>>(n); };
  visit_stem_acts(c, d, sa, alloc);
  visit_head_acts(c, d, ha, alloc, cuda::CudaOps::kFusedNormModulate);
  cuda::GemmContext gemm;
  cuda::CudaOps ops{gemm, nullptr, scratch.get(), cuda::block_reduction_scratch(c, d)};
  const StemW<const uint16_t*> wsd = bind_stem<const uint16_t>(c, gws.get());
  const HeadW<const uint16_t*> whd = bind_head<const uint16_t>(c, gwh.get());
  cuda::stem_forward(ops, c, d, wsd, glat.get(), gt.get(), gctx.get(), sa);
  cuda::head_forward(ops, c, d, whd, gx.get(), geh.get(), ha, gvel.get());
  cuda::head_backward(ops, c, d, whd, gx.get(), ha, gdvel.get(), gdx.get(), gdeh.get(), bind_head<float>(c, ggh.get()),
                      as.get(), ss.get());
  cuda::stem_backward(ops, c, d, wsd, sa, gdx0.get(), gdes.get(), gde0.get(), gdctx.get(),
                      bind_stem<float>(c, ggs.get()), gdlat.get(), gdcontext.get(), as.get(), ss.get());

  // float64 reference
  std::vector<std::vector<double>> held;
  StemActs<double> rs{};
  HeadActs<double> rh{};
  auto host = [&](int64_t n, auto& field) { field = held.emplace_back(size_t(n)).data(); };
  visit_stem_acts(c, d, rs, host);
  visit_head_acts(c, d, rh, host);
  RefOps ref;
  std::vector<double> lat = wide(latents), td = wide(t), ctxd = wide(context), ehd = wide(e_head), dveld = wide(dvel),
                      des = wide(de_stem), de0d = wide(de0), deh = wide(de_head0), gs = wide(gs0), gh = wide(gh0),
                      vel(static_cast<size_t>(video_out)), dxh(static_cast<size_t>(N * D)),
                      dlat(static_cast<size_t>(video_in)), dcontext(static_cast<size_t>(B * d.Lc * c.text_dim)),
                      rscratch(static_cast<size_t>(std::max(stem_scratch_numel(c, d), head_scratch_numel(c, d))));
  const StemW<const double*> wsr = bind_stem<const double>(c, ws.values.data());
  const HeadW<const double*> whr = bind_head<const double>(c, wh.values.data());
  stem_impl::stem_forward(ref, c, d, wsr, lat.data(), td.data(), ctxd.data(), rs);
  head_impl::head_forward(ref, c, d, whr, x_head.values.data(), ehd.data(), rh, vel.data());
  head_impl::head_backward(ref, c, d, whr, x_head.values.data(), rh, dveld.data(), dxh.data(), deh.data(),
                           bind_head<double>(c, gh.data()), rscratch.data(), rscratch.data() + N * (Po + 2 * D));
  stem_impl::stem_backward(ref, c, d, wsr, rs, dx0.values.data(), des.data(), de0d.data(), dctx.values.data(),
                           bind_stem<double>(c, gs.data()), dlat.data(), dcontext.data(), rscratch.data(),
                           rscratch.data());

  auto bf16_at = [](uint16_t* p, int64_t n) {
    std::vector<uint16_t> h(static_cast<size_t>(n));
    MS_CUDA_CHECK(cudaDeviceSynchronize());
    MS_CUDA_CHECK(cudaMemcpy(h.data(), p, size_t(n) * 2, cudaMemcpyDeviceToHost));
    return widen(h);
  };
  auto f32_at = [](const float* p, int64_t n) {
    std::vector<float> h(static_cast<size_t>(n));
    MS_CUDA_CHECK(cudaDeviceSynchronize());
    MS_CUDA_CHECK(cudaMemcpy(h.data(), p, size_t(n) * 4, cudaMemcpyDeviceToHost));
    return h;
  };
  auto span = [](const double* p, int64_t n) { return std::vector<double>(p, p + n); };
  expect_close("x0", bf16_at(sa.x0, N * D), span(rs.x0, N * D), 2e-2);
  expect_close("ctx", bf16_at(sa.ctx, Nt * D), span(rs.ctx, Nt * D), 2e-2);
  expect_close("e", f32_at(sa.e, B * D), span(rs.e, B * D), 1e-3);
  expect_close("e0", f32_at(sa.e0, B * 6 * D), span(rs.e0, B * 6 * D), 1e-3);
  expect_close("velocity", gvel.read(), vel, 2e-2);
  expect_close("head dx", widen(gdx.read()), dxh, 3e-2);
  expect_close("head de", gdeh.read(), deh, 3e-2);
  expect_close("dlatents", gdlat.read(), dlat, 3e-2);
  expect_close("dcontext", gdcontext.read(), dcontext, 3e-2);
  expect_close("stem de", gdes.read(), des, 1e-3);  // clobbered with the fp32 time path's gradient
  expect_stage_grads<HeadW<uint16_t*>>(visit_h, ggh.read(), gh, 3e-2);
  expect_stage_grads<StemW<uint16_t*>>(visit_s, ggs.read(), gs, 3e-2);
}

}  // namespace
}  // namespace ms::test
