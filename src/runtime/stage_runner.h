// What a backend computes in a streamed step (runtime/streamed_model.h): each stage's forward or backward from
// a weight slot, in the backend's element types and workspace layout. StreamedModel owns the schedule, the
// streams and the arena; a runner lays its workspace out in the piece of the arena it is given and enqueues
// each stage's ops. Every call but bind and loss is made inside a compute-stream launch (Backend::launch).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "runtime/backend.h"

namespace ms {

// One step's inputs on the device, fp32: x_t [B, in_dim, F, H, W], t [Bt] (d.time_rows per sample), context [B, Lt, text_dim] (padded to
// text_len by the caller), target [B, out_dim, F, H, W].
struct StepInputs {
  const float *xt, *t, *context, *target;
};

class StageRunner {
 public:
  virtual ~StageRunner() = default;

  // Bytes per activation element: 4 (the CPU backend's f32 layout) or 2 (the CUDA backend's, runtime/arena.h).
  virtual int act_bytes() const = 0;
  // Bytes of the workspace in `layout` with every buffer aligned to `align` bytes, and its binding at `base`.
  virtual int64_t workspace_bytes(const WorkspaceLayout& layout, int64_t align) const = 0;
  virtual void bind(void* base, const WorkspaceLayout& layout, int64_t align) = 0;
  // Block input k's buffer in the workspace ([N, D] activations, N the largest shape's): checkpoint slot k of xs.
  virtual void* checkpoint(int64_t slot) const = 0;
  // The dims of the stages enqueued next: one of the shapes the runner was made for, or one at a smaller batch
  // (StepShapes::fits; throws otherwise). Called inside a compute-stream launch, before the step's stages.
  virtual void set_dims(const ModelDims& d) = 0;

  // Weights w are a slot in the backend's weight dtype; weight gradients g are fp32 [stage numel] and are
  // overwritten. The stem writes block 0's input into x0.
  virtual void stem_forward(const void* w, const StepInputs& in, void* x0) = 0;
  virtual void block_forward(int64_t b, const void* w, const void* x, void* out) = 0;
  // The head's forward, the MSE loss against in.target and the head's backward: velocity and dvelocity are
  // fp32 [B, out_dim, F, H, W]; starts the backward's accumulators (de, de0, dctx) from zero.
  virtual void head_step(const void* w, const void* x, const StepInputs& in, float* velocity, float* dvelocity,
                         float* g) = 0;
  // The head's forward alone (sampling): velocity fp32 [B, out_dim, F, H, W] from block L's output x.
  virtual void head_forward(const void* w, const void* x, float* velocity) = 0;
  virtual void block_backward(int64_t b, const void* w, const void* x, float* g) = 0;
  virtual void stem_backward(const void* w, float* g) = 0;
  // The last head_step's loss, once the compute stream has finished it.
  virtual double loss() = 0;

  // Sees every stage's forward output (model/model.h) where the backend keeps activations in host memory (the
  // CPU backend); elsewhere throws ms::Error.
  virtual void set_probe(StageProbe<float> probe) = 0;
};

}  // namespace ms
