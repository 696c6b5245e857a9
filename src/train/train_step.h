// One training step's compute as a run's setup resolved it (docs/runtime.md): the model resident on the CPU
// (--offload none) or streamed through a backend's arena (--offload stream), times the optimizer applied after the
// whole backward (deferred schedule) or to each stage as its gradients land (immediate schedule). The trainer's loop
// drives it; this owns the backend, the model and the two batches the loop alternates between (pinned for the link).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/aligned.h"
#include "model/config.h"
#include "model/dims.h"
#include "model/param_table.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/device_collectives.h"
#include "runtime/host_state.h"
#include "runtime/shards.h"
#include "train/batch.h"
#include "train/nonfinite.h"
#include "train/options.h"
#include "train/run_setup.h"

namespace ms {

class StreamedModel;
class Trace;
template <class T>
class ResidentModel;

// An AdamW step to apply: its 1-based step number and its gradient-clipping factor.
struct Update {
  int64_t step = 0;  // 0: nothing pending
  float scale = 1;
};

// Which of a step's --grad-accum micro-batches a forward and backward computes, and (several ranks) the weight of
// each rank's mean-loss gradients in the batch's: its share of the global batch's clips (docs/distributed.md).
struct Micro {
  int64_t index = 0, count = 1;
  std::vector<float> rank_weight{1.0f};
};

class TrainStep {
 public:
  // Builds the model on setup's backend and allocates the batches with `maker`. The model and arena hold a step at
  // any of `shapes`; each step runs at its batch's dims. host holds this rank's shards of the state (all of it for
  // one rank); comm: the run's ranks.
  TrainStep(const TrainOptions& opts, const RunSetup& setup, const TrainHooks& hooks, const ModelConfig& cfg,
            const StepShapes& shapes, const ParamTable& table, const Shards& shards, HostState& host,
            Communicator& comm, const BatchMaker& maker, NonFiniteMonitor& nonfinite);
  // Waits for device work still in flight (an exception may have left a step midway), then unpins.
  ~TrainStep();
  TrainStep(const TrainStep&) = delete;
  TrainStep& operator=(const TrainStep&) = delete;

  // The batch of step t: batches alternate, so step t+1's is made while step t computes.
  Batch& batch(int64_t t) { return batches_[size_t(t % 2)]; }
  // Streamed: enqueues the upload of a batch just made (it runs behind the current step's compute).
  void enqueue_inputs(const Batch& b);

  // Micro-batch `micro` of step u.step on `batch`: forward, loss, backward, and the optimizer as the schedule places
  // it (immediate: clipped by u.scale, the previous step's norm). Returns the loss. Deferred, the gradients of the
  // step's micro-batches are summed in the host pool and, after the last, scaled by 1 / count (the mean of the
  // micro-batches' mean losses); stage_sumsq() then holds each stage's sum of squared gradients (this rank's
  // shards'). `during` runs while the device works. The immediate schedule takes one micro-batch per step. Returns
  // this rank's loss.
  double step(const Batch& batch, const Update& u, const std::function<void()>& during, const Micro& micro = {});
  // A step whose batch is not finite: computes nothing, lets the previous pending update land; returns NaN.
  double skip();
  // Deferred: the update of the step just run, applied now (resident) or pipelined with the next forward.
  void defer(const Update& u);
  // Applies the pending update to every stage now (before a checkpoint or samples read the weights).
  void apply_pending();

  std::vector<double>& stage_sumsq() { return stage_sumsq_; }
  // What the device side holds during a step: the streamed arena, or all f32 weights and the workspace.
  int64_t device_peak_bytes() const;
  int64_t uploaded_weight_bytes() const;  // per step, streamed; 0 resident
  int64_t device_budget_bytes() const;    // the arena's budget in effect, streamed; 0: no limit
  BackendKind backend_kind() const;
  Trace* trace() { return trace_.get(); }

 private:
  double step_deferred(const Batch& batch, int64_t t, const std::function<void()>& during, const Micro& micro);
  // Deferred, after micro-batch `micro` of step t landed stage s's gradients in `grads` (the host pool for the
  // first): adds them to the pool, and after the last scales the pool's span and sums its squares.
  void gather(size_t s, const float* grads, int64_t t, const Micro& micro);
  double step_immediate(const Batch& batch, const Update& u, const std::function<void()>& during, const Micro& micro);
  void immediate_update(size_t s, float* grads, const Update& u);
  double checked_sumsq(size_t s, float* grads, int64_t t);
  // Resident forward, loss and backward; this rank's gradients of every parameter are added into full [P], and with
  // several ranks their weighted sum's shard lands in shard (pool layout).
  double resident_step(const Batch& batch, float* full, float* shard, const Micro& micro);
  float* host_grads(size_t s) { return host_.grads.data() + shards_.stage(s).offset; }
  void update_stage(size_t s, const float* grads, const Update& u);

  const TrainOptions& opts_;
  const RunSetup& setup_;
  const TrainHooks& hooks_;
  const ParamTable& table_;
  const Shards& shards_;
  HostState& host_;
  Communicator& comm_;
  int64_t out_dim_;                                 // the model's
  std::unique_ptr<ResidentModel<float>> resident_;  // --offload none
  AlignedBuffer<float> params_;                     // [P] resident: f32 copy of the working weights
  AlignedBuffer<float> resident_grads_;             // [P] resident, immediate, --grad-accum or several ranks: a
                                                    // backward's gradients
  AlignedBuffer<uint16_t> gathered_;                // [P] resident, several ranks: every rank's working weights
  AlignedBuffer<float> shard_grads_;                // [shard] resident, several ranks: a later micro-batch's or the
                                                    // immediate schedule's reduced gradients
  std::unique_ptr<Trace> trace_;
  std::unique_ptr<DeviceCollectives> collectives_;  // several ranks on a GPU: between their devices (outlives backend_)
  std::unique_ptr<Backend> backend_;                // --offload stream
  int optimizer_stream_ = -1;
  std::unique_ptr<StreamedModel> streamed_;
  Update pending_;                   // deferred: the update waiting for the next step
  std::vector<Event> updated_;       // immediate, streamed: each stage's last update
  std::vector<double> stage_sumsq_;  // this step's per-stage sums of squared gradients
  Batch batches_[2];                 // step t uses batches_[t % 2]; the other is made meanwhile
  std::vector<float> pred_, dpred_;  // [B, C, F, H, W] of the largest shape
};

}  // namespace ms
