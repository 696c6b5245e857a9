#include "backend/cuda/cuda_stage_runner.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/check.h"
#include "backend/cuda/cuda_stages.h"
#include "backend/cuda/dsa.h"
#include "backend/cuda/flash_attention.h"
#include "backend/cuda/mse_loss.h"
#include "core/check.h"
#include "model/workspace.h"

namespace ms::cuda {
namespace {

const uint16_t* bf16(const void* p) { return static_cast<const uint16_t*>(p); }
uint16_t* bf16(void* p) { return static_cast<uint16_t*>(p); }

int64_t video_numel(const ModelConfig& c, const ModelDims& d) { return d.B * c.out_dim * d.F * d.H * d.W; }

const ModelConfig& with_gpu_attention(const ModelConfig& c) {
  if (const std::string why = CudaStageRunner::refuses(c); !why.empty())
    MS_FAIL("--backend cuda: ", why, "; use --backend cpu");
  return c;
}

}  // namespace

std::string CudaStageRunner::refuses(const ModelConfig& c) {
  const auto& at = c.attention;
  const int64_t hd = c.head_dim(), limit = at.type == AttentionType::window ? kFlashMaxHeadDim : kDsaMaxHeadDim;
  if (at.type != AttentionType::dense && hd > limit)
    return cat(at.type, " attention on the GPU takes head dims up to ", limit, ", not ", hd);
  if (at.is_dsa() && at.slots() > kDsaMaxSlots)
    return cat("dsa on the GPU takes windows of up to ", kDsaMaxSlots, " slots, not ", at.slots());
  return "";
}

CudaStageRunner::CudaStageRunner(const ModelConfig& c, const StepShapes& shapes)
    : cfg_(with_gpu_attention(c)),
      shapes_(shapes),
      dims_(shapes.all.front()),
      table_(c),
      gemm_(std::make_unique<GemmContext>()),
      ops_{*gemm_, nullptr, nullptr, 0} {
  const int64_t scratch = shapes.most([&](const ModelDims& d) { return mse_loss_scratch(video_numel(c, d)); });
  MS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&loss_), size_t(1 + scratch) * sizeof(double)));
}

CudaStageRunner::~CudaStageRunner() { cudaFree(loss_); }

int64_t CudaStageRunner::workspace_bytes(const WorkspaceLayout& layout, int64_t align) const {
  using WS = ModelWorkspace<uint16_t, float>;
  return ms::workspace_bytes<WS>(model_workspace_visitor<WS>(cfg_, shapes_, layout), align);
}

void CudaStageRunner::bind(void* base, const WorkspaceLayout& layout, int64_t align) {
  MS_CHECK(layout.fused_norm == CudaOps::kFusedNormModulate && layout.reduction_scratch >= 0,
           "the CUDA stages need the GPU workspace layout (runtime/arena.h, act_bytes 2)");
  using WS = ModelWorkspace<uint16_t, float>;
  ws_ = bind_workspace<WS>(base, model_workspace_visitor<WS>(cfg_, shapes_, layout), align);
  ops_.scratch = ws_.reduction;
  ops_.scratch_numel = layout.reduction_scratch;
}

void CudaStageRunner::set_dims(const ModelDims& d) {
  MS_CHECK(shapes_.fits(d), "a step of ", d.B, " x ", d.F, "x", d.H, "x", d.W, " does not fit the runner's shapes");
  dims_ = d;
}

CudaOps& CudaStageRunner::ops() {
  ops_.stream = current_stream();
  return ops_;
}

void CudaStageRunner::stem_forward(const void* w, const StepInputs& in, void* x0) {
  CudaOps& o = ops();
  cuda::stem_forward(o, cfg_, dims_, bind_stem(cfg_, bf16(w)), in.xt, in.t, in.context, ws_.stem);
  o.copy(bf16(x0), ws_.stem.x0, dims_.N() * cfg_.dim);
}

void CudaStageRunner::block_forward(int64_t b, const void* w, const void* x, void* out) {
  cuda::block_forward(ops(), cfg_, dims_, b, bind_block(cfg_, bf16(w)), bf16(x), ws_.stem.e0, ws_.stem.ctx, ws_.block,
                      bf16(out));
}

void CudaStageRunner::head_forward(const void* w, const void* x, float* velocity) {
  cuda::head_forward(ops(), cfg_, dims_, bind_head(cfg_, bf16(w)), bf16(x), ws_.stem.e, ws_.head, velocity);
}

void CudaStageRunner::head_step(const void* w, const void* x, const StepInputs& in, float* velocity, float* dvelocity,
                                float* g) {
  CudaOps& o = ops();
  const HeadW<const uint16_t*> hw = bind_head(cfg_, bf16(w));
  const int64_t D = cfg_.dim;
  o.zero(g, grad_numel(table_.stages().size() - 1));
  head_forward(w, x, velocity);
  cuda::mse_loss({.pred = velocity,
                  .target = in.target,
                  .dpred = dvelocity,
                  .n = video_numel(cfg_, dims_),
                  .period = dims_.F * dims_.H * dims_.W,
                  .skip = dims_.cond_frames * dims_.H * dims_.W},
                 loss_, loss_ + 1, o.stream);
  o.zero(ws_.de, dims_.Bt() * D);
  o.zero(ws_.de0, dims_.Bt() * 6 * D);
  o.zero(ws_.dctx, dims_.B * dims_.Lt * D);
  cuda::head_backward(o, cfg_, dims_, hw, bf16(x), ws_.head, dvelocity, ws_.dres, ws_.de, bind_head(cfg_, g),
                      ws_.scratch, ws_.stat_scratch);
}

void CudaStageRunner::block_backward(int64_t b, const void* w, const void* x, float* g) {
  CudaOps& o = ops();
  o.zero(g, grad_numel(size_t(b + 1)));
  cuda::block_backward(o, cfg_, dims_, b, bind_block(cfg_, bf16(w)), bf16(x), ws_.stem.e0, ws_.stem.ctx, ws_.block,
                       ws_.block_grads, ws_.dres, ws_.dres, ws_.de0, ws_.dctx, bind_block(cfg_, g));
}

void CudaStageRunner::stem_backward(const void* w, float* g) {
  CudaOps& o = ops();
  o.zero(g, grad_numel(0));
  cuda::stem_backward(o, cfg_, dims_, bind_stem(cfg_, bf16(w)), ws_.stem, ws_.dres, ws_.de, ws_.de0, ws_.dctx,
                      bind_stem(cfg_, g), nullptr, nullptr, ws_.scratch, ws_.stat_scratch);
}

double CudaStageRunner::loss() {
  double loss = 0;
  MS_CUDA_CHECK(cudaMemcpy(&loss, loss_, sizeof(double), cudaMemcpyDeviceToHost));
  return loss;
}

void CudaStageRunner::set_probe(StageProbe<float> probe) {
  if (probe)
    MS_FAIL(
        "the CUDA backend keeps the activations on the GPU: a stage probe (the forward's finiteness check) "
        "runs on the CPU backend only");
}

}  // namespace ms::cuda
