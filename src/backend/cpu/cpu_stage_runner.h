// The CPU backend's stage runner: f32 weights and activations in host memory, the CPU kernels
// (backend/cpu/cpu_stages.h), each stage run on the compute stream's worker thread.
#pragma once
#include "runtime/stage_runner.h"

namespace ms {

constexpr int kCpuComputeBytes = 4;  // the CPU backend computes in f32: weights and activations

class CpuStageRunner final : public StageRunner {
 public:
  // The workspace holds a step at any of `shapes`; steps start at the first.
  CpuStageRunner(const ModelConfig& c, const StepShapes& shapes)
      : cfg_(c), shapes_(shapes), dims_(shapes.all.front()), table_(c) {}

  int act_bytes() const override { return kCpuComputeBytes; }
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
  double loss() override { return loss_; }
  void set_probe(StageProbe<float> probe) override { probe_ = std::move(probe); }

 private:
  ModelConfig cfg_;
  StepShapes shapes_;
  ModelDims dims_;  // the current step's
  ParamTable table_;
  ModelWorkspace<float> ws_{};
  double loss_ = 0;
  StageProbe<float> probe_;
};

}  // namespace ms
