// The CUDA backend's stage runner (runtime/stage_runner.h): the stages of backend/cuda/cuda_stages.h on the
// compute stream of each launch, bf16 weights and activations, fp32 statistics, time path and weight gradients,
// in the layout `megaslide plan` accounts for the GPU (runtime/arena.h, act_bytes 2). Outside the arena: the
// cuBLASLt workspace (GemmContext) and the loss with its partial sums, each allocated once.
#pragma once
#include <memory>

#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/gemm.h"
#include "model/param_table.h"
#include "runtime/stage_runner.h"

namespace ms::cuda {

class CudaStageRunner final : public StageRunner {
 public:
  // Why this runner's kernels cannot run model c, in words (ms::cat); empty when they can.
  static std::string refuses(const ModelConfig& c);
  // Throws ms::Error for an attention type without CUDA kernels. The workspace holds a step at any of `shapes`.
  CudaStageRunner(const ModelConfig& c, const StepShapes& shapes);
  ~CudaStageRunner() override;
  CudaStageRunner(const CudaStageRunner&) = delete;
  CudaStageRunner& operator=(const CudaStageRunner&) = delete;

  int act_bytes() const override { return kComputeBytes; }
  int64_t workspace_bytes(const WorkspaceLayout& layout, int64_t align) const override;
  void bind(void* base, const WorkspaceLayout& layout, int64_t align) override;
  void* checkpoint(int64_t slot) const override {
    return ws_.xs + slot * shapes_.most([](const ModelDims& d) { return d.N(); }) * cfg_.dim;
  }
  void set_dims(const ModelDims& d) override;
  void stem_forward(const void* w, const StepInputs& in, void* x0) override;
  void block_forward(int64_t b, const void* w, const void* x, void* out) override;
  void head_forward(const void* w, const void* x, float* velocity) override;
  void head_step(const void* w, const void* x, const StepInputs& in, float* velocity, float* dvelocity,
                 float* g) override;
  void block_backward(int64_t b, const void* w, const void* x, float* g) override;
  void stem_backward(const void* w, float* g) override;
  double loss() override;
  // Accepts only an empty probe: the activations stay on the GPU.
  void set_probe(StageProbe<float> probe) override;

 private:
  // The ops on the stream of the launch being enqueued.
  CudaOps& ops();
  int64_t grad_numel(size_t stage) const { return table_.stages()[stage].numel; }

  ModelConfig cfg_;
  StepShapes shapes_;
  ModelDims dims_;  // the current step's
  ParamTable table_;
  std::unique_ptr<GemmContext> gemm_;
  ModelWorkspace<uint16_t, float> ws_{};
  CudaOps ops_;
  double* loss_ = nullptr;  // [1 + mse_loss_scratch] on the device: the loss, then its partial sums
};

}  // namespace ms::cuda
