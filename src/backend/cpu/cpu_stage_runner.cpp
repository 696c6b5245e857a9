#include "backend/cpu/cpu_stage_runner.h"

#include <algorithm>

#include "backend/cpu/cpu_stages.h"
#include "core/check.h"
#include "model/workspace.h"
#include "ops/mse_loss.h"

namespace ms {
namespace {

const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }

}  // namespace

int64_t CpuStageRunner::workspace_bytes(const WorkspaceLayout& layout, int64_t align) const {
  return ms::workspace_bytes<ModelWorkspace<float>>(
      model_workspace_visitor<ModelWorkspace<float>>(cfg_, shapes_, layout), align);
}

void CpuStageRunner::bind(void* base, const WorkspaceLayout& layout, int64_t align) {
  ws_ = bind_workspace<ModelWorkspace<float>>(
      base, model_workspace_visitor<ModelWorkspace<float>>(cfg_, shapes_, layout), align);
}

void CpuStageRunner::set_dims(const ModelDims& d) {
  MS_CHECK(shapes_.fits(d), "a step of ", d.B, " x ", d.F, "x", d.H, "x", d.W, " does not fit the runner's shapes");
  dims_ = d;
}

void CpuStageRunner::stem_forward(const void* w, const StepInputs& in, void* x0) {
  const int64_t ND = dims_.N() * cfg_.dim;
  ms::stem_forward(cfg_, dims_, bind_stem(cfg_, f32(w)), in.xt, in.t, in.context, ws_.stem);
  std::copy(ws_.stem.x0, ws_.stem.x0 + ND, f32(x0));
  if (probe_) probe_(0, f32(x0), ND);
}

void CpuStageRunner::block_forward(int64_t b, const void* w, const void* x, void* out) {
  ms::block_forward(cfg_, dims_, b, bind_block(cfg_, f32(w)), f32(x), ws_.stem.e0, ws_.stem.ctx, ws_.block, f32(out));
  if (probe_) probe_(b + 1, f32(out), dims_.N() * cfg_.dim);
}

void CpuStageRunner::head_forward(const void* w, const void* x, float* velocity) {
  ms::head_forward(cfg_, dims_, bind_head(cfg_, f32(w)), f32(x), ws_.stem.e, ws_.head, velocity);
  if (probe_) probe_(cfg_.num_layers + 1, velocity, dims_.B * cfg_.out_dim * dims_.F * dims_.H * dims_.W);
}

void CpuStageRunner::head_step(const void* w, const void* x, const StepInputs& in, float* velocity, float* dvelocity,
                               float* g) {
  const int64_t video = dims_.B * cfg_.out_dim * dims_.F * dims_.H * dims_.W, D = cfg_.dim;
  const HeadW<const float*> hw = bind_head(cfg_, f32(w));
  std::fill(g, g + table_.stages().back().numel, 0.0f);
  head_forward(w, x, velocity);
  loss_ = cpu::mse_loss<float>({.pred = velocity,
                                .target = in.target,
                                .dpred = dvelocity,
                                .n = video,
                                .period = dims_.F * dims_.H * dims_.W,
                                .skip = dims_.cond_frames * dims_.H * dims_.W});
  std::fill(ws_.de, ws_.de + dims_.Bt() * D, 0.0f);
  std::fill(ws_.de0, ws_.de0 + dims_.Bt() * 6 * D, 0.0f);
  std::fill(ws_.dctx, ws_.dctx + dims_.B * dims_.Lt * D, 0.0f);
  head_backward(cfg_, dims_, hw, f32(x), ws_.head, dvelocity, ws_.dres, ws_.de, bind_head(cfg_, g), ws_.scratch);
}

void CpuStageRunner::block_backward(int64_t b, const void* w, const void* x, float* g) {
  std::fill(g, g + table_.stages()[size_t(b + 1)].numel, 0.0f);
  ms::block_backward(cfg_, dims_, b, bind_block(cfg_, f32(w)), f32(x), ws_.stem.e0, ws_.stem.ctx, ws_.block,
                     ws_.block_grads, ws_.dres, ws_.dres, ws_.de0, ws_.dctx, bind_block(cfg_, g));
}

void CpuStageRunner::stem_backward(const void* w, float* g) {
  std::fill(g, g + table_.stages().front().numel, 0.0f);
  ms::stem_backward(cfg_, dims_, bind_stem(cfg_, f32(w)), ws_.stem, ws_.dres, ws_.de, ws_.de0, ws_.dctx,
                    bind_stem(cfg_, g), static_cast<float*>(nullptr), static_cast<float*>(nullptr), ws_.scratch);
}

}  // namespace ms
