// The streaming schedule (docs/runtime.md): the model runs stage by stage from K weight slots of a device
// arena carved once; stage s+1.. are uploaded on the H2D stream while stage s computes; blocks keep
// only their inputs and are recomputed in the backward; each stage's gradients leave on the D2H stream
// as soon as its backward is done. Nothing about the model stays on the device between steps (forwards alone, for
// sampling, may keep every stage in a slot of its own from one to the next).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/model.h"
#include "runtime/arena.h"
#include "runtime/backend.h"
#include "runtime/communicator.h"
#include "runtime/device_collectives.h"
#include "runtime/host_state.h"
#include "runtime/shards.h"
#include "runtime/stage_runner.h"

namespace ms {

struct StreamOptions {
  int prefetch = 2;           // K weight slots (>= 2)
  int64_t device_memory = 0;  // bytes the arena may use (--device-memory); 0: the backend's default_device_memory
  bool serialize = false;     // no overlap: every copy waits for the previous compute and vice versa (benchmarks)
  bool skip_compute = false;  // every compute launch is empty: the schedule's copies alone (benchmarks)
  bool offload_activations = false;  // block-input checkpoints in host memory, 3 staging slots on the device
  int ranks =
      1;  // ranks of a distributed run: weight and gradient slots hold ranks x a stage's chunk (runtime/shards.h)
  bool forward_only = false;  // sampling (enqueue_forward only): no gradient slots, and the block inputs in 3 rotating
                              // slots instead of one each (the layout offload_activations uses, nothing on the host)
};

// The streamed model's options for a run's runtime options on `ranks` ranks.
StreamOptions stream_options(const RuntimeOptions& r, int ranks);

// The arena StreamedModel carves on a backend computing with `weight_bytes` weights and `act_bytes` activations.
DevicePlan streamed_arena(const ModelConfig& c, const StepShapes& shapes, int weight_bytes, int act_bytes,
                          const StreamOptions& o);

// Where each backward use's gradients go on the host. Use j (0 = the head, then blocks L-1 .. 0, then
// the stem) of stage s is copied into buffer(j, s) after the event free(j); landed(j, s, host, e) is
// called once that copy is enqueued, e being its completion. With several ranks, what is copied is this rank's
// shard of the stage (runtime/shards.h).
struct GradRoute {
  std::function<float*(int j, int s)> buffer;
  std::function<Event(int j)> free;
  std::function<void(int j, int s, float* host, Event landed)> landed;
};

// One stage use of a step and the weight slot it computes from. Uses run forward 0 .. S-1 (the head also
// runs its backward), then backward S-2 .. 0. A use whose stage is still in a slot from earlier in the step
// is resident (no upload): the backward starts with the last K forward stages in place, the accounting of
// step_traffic (src/plan). Otherwise it takes the slot used longest ago, so its upload can run K-1 uses ahead.
struct SlotUse {
  int stage;
  int slot;
  int previous;  // the use that last computed from the slot (-1: none this step)
  bool resident;
};
std::vector<SlotUse> slot_uses(int stages, int K);

class StreamedModel {
 public:
  // Plans and carves the arena for `runner` (the backend's stage runner, made for the same shapes) once, for a
  // step at any of `shapes`; throws ms::Error when it exceeds the budget, naming the minimum. comm: the ranks of a
  // distributed run (o.ranks of them; null for one), whose weight shards are gathered on the H2D stream and whose
  // gradients are reduce-scattered on the D2H stream (docs/distributed.md): between the devices through `device`
  // where the backend has device collectives, else through host memory on comm.
  StreamedModel(const ModelConfig& c, const StepShapes& shapes, Backend& backend, const StreamOptions& o,
                std::unique_ptr<StageRunner> runner, Communicator* comm = nullptr, DeviceCollectives* device = nullptr);
  ~StreamedModel();
  StreamedModel(const StreamedModel&) = delete;
  StreamedModel& operator=(const StreamedModel&) = delete;

  // Enqueues the upload of one step's inputs x_t [B, C, F, H, W], t [Bt] (d.time_rows per sample), context [B, Lt, text_dim] and
  // target at dims d (StepShapes::fits) into the other of two device input sets, so that the next step's inputs
  // travel during this step's backward. The host arrays must stay unchanged until the step that uses them has
  // finished. The step runs at d. target may be null for a forward (enqueue_forward), not for a step.
  void enqueue_inputs(const ModelDims& d, const float* xt, const float* t, const float* context, const float* target);
  // One training step on the device from the inputs enqueued last: forward, MSE loss and backward, and
  // every stage's gradients sent along `route`. Stage s's weights are uploaded from weights (bf16, host: [P], or
  // this rank's shard pool) after the event ready(s) (its optimizer update). Several ranks: the gradients sent are
  // the ranks' weighted by rank_weight (one per rank) and summed. Enqueues everything and returns; the loss is
  // valid after finish().
  void enqueue_step(const uint16_t* weights, const GradRoute& route, const std::function<Event(int)>& ready,
                    std::span<const float> rank_weight = {});
  // Enqueues the forward alone of the inputs enqueued last (sampling; their target may be null) and the copy of its
  // velocity fp32 [B, out_dim, F, H, W] into `velocity` (host) on the D2H stream; finish() waits for it, and must be
  // called before the next enqueue_forward or enqueue_step. One rank. Stage s takes slot s mod K. Where every stage
  // has a slot of its own (K >= stages), the stages stay there from one forward to the next while `weights` is the
  // same pointer (the caller leaves its contents unchanged meanwhile), so a sampler's model crosses the link once; a
  // training step in between uploads afresh.
  void enqueue_forward(const uint16_t* weights, float* velocity);
  // Weight elements the last enqueue_forward uploaded (0 where every stage was still in its slot).
  int64_t forward_uploads() const { return forward_uploads_; }
  // Waits for the step and returns its loss (after enqueue_forward: meaningless).
  double finish();

  // Sees every stage's forward output on the compute stream (model/model.h); set between steps. The CPU backend
  // only (StageRunner::set_probe).
  void set_probe(StageProbe<float> probe) { runner_->set_probe(std::move(probe)); }

  const DevicePlan& plan() const { return plan_; }
  // Weight elements uploaded per step (bf16 over the link; this rank's shards).
  int64_t uploaded_weights() const;
  int64_t arena_bytes() const { return plan_.peak(); }
  // The arena's budget in effect: --device-memory, else the backend's default; 0: no limit.
  int64_t device_budget() const { return budget_; }
  const ParamTable& table() const { return table_; }

 private:
  struct Streams {
    int compute, h2d, d2h;
  };
  ModelConfig cfg_;
  StepShapes shapes_;
  ParamTable table_;
  Communicator* comm_;         // null: one rank
  DeviceCollectives* device_;  // null: the collectives go through comm_
  Shards shards_;
  Backend& be_;
  StreamOptions opts_;
  DevicePlan plan_;
  int64_t budget_ = 0;  // device_budget()
  std::vector<SlotUse> uses_;
  Streams st_;
  char* arena_ = nullptr;
  std::unique_ptr<StageRunner> runner_;  // the backend's stages, its workspace in the arena
  std::vector<char*> slots_;             // K x [max stage] weights as the device computes with them
  std::vector<float*> grad_slots_;       // 2 x [max stage] fp32 gradients
  struct Inputs {
    float *xt, *target, *context, *t;  // [B, C, F, H, W] x2, [B, Lt, td], [Bt]
    ModelDims dims;                    // the step's
    Event landed;                      // their upload is done
    Event free;                        // the last step that read them has finished with them
    bool has_target = false;           // a step needs one; a forward does not
  };
  Inputs inputs_[2];
  // enqueue_forward: the stage each slot holds (-1: none), from which weights, and its last user's completion
  std::vector<int> held_;  // [K]
  const uint16_t* held_from_ = nullptr;
  std::vector<Event> forward_slot_free_;  // [K]
  int64_t forward_uploads_ = 0;
  int current_ = 1;                       // the input set enqueued last
  float *velocity_, *dvelocity_;          // [B, C, F, H, W]
  AlignedBuffer<char> host_checkpoints_;  // offload_activations: [offloaded_checkpoints, N, D] in host memory
  int64_t checkpoint_bytes_ = 0;          // one block input [N, D] of the largest shape in the runner's dtype
  // Device buffer of block input k: its own slot, or staging slot k mod 3 when offloaded.
  void* checkpoint(int64_t k) const;
  char* host_checkpoint(int64_t k) { return host_checkpoints_.data() + k * checkpoint_bytes_; }
};

}  // namespace ms
