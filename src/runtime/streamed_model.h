// The streaming schedule (DESIGN §5): the model runs stage by stage from K weight slots of a device
// arena carved once; stage s+1.. are uploaded on the H2D stream while stage s computes; blocks keep
// only their inputs and are recomputed in the backward; each stage's gradients leave on the D2H stream
// as soon as its backward is done. Nothing about the model stays on the device between steps.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "model/model.h"
#include "plan/device_plan.h"
#include "runtime/backend.h"
#include "runtime/host_state.h"

namespace ms {

struct StreamOptions {
  int prefetch = 2;           // K weight slots (>= 2)
  int64_t device_budget = 0;  // bytes the arena may use; 0: no limit
  bool serialize = false;     // no overlap: every copy waits for the previous compute and vice versa (benchmarks)
  bool offload_activations = false;  // block-input checkpoints in host memory, 3 staging slots on the device
};

// Where each backward use's gradients go on the host. Use j (0 = the head, then blocks L-1 .. 0, then
// the stem) of stage s is copied into buffer(j, s) after the event free(j); landed(j, s, host, e) is
// called once that copy is enqueued, e being its completion.
struct GradRoute {
  std::function<float*(int j, int s)> buffer;
  std::function<Event(int j)> free;
  std::function<void(int j, int s, float* host, Event landed)> landed;
};

class StreamedModel {
 public:
  // Plans and carves the arena; throws ms::Error when it exceeds the budget, naming the minimum.
  StreamedModel(const ModelConfig& c, const ModelDims& d, Backend& backend, const StreamOptions& o);
  ~StreamedModel();
  StreamedModel(const StreamedModel&) = delete;
  StreamedModel& operator=(const StreamedModel&) = delete;

  // One training step on the device: uploads x_t [B, C, F, H, W], t [B], context [B, Lt, text_dim] and
  // target, runs forward, MSE loss and backward, and sends every stage's gradients along `route`.
  // Stage s's weights are uploaded from weights [P] (bf16, host) after the event ready(s) (its optimizer
  // update). Enqueues everything and returns; the loss is valid after finish().
  void enqueue_step(const uint16_t* weights, const float* xt, const float* t, const float* context, const float* target,
                    const GradRoute& route, const std::function<Event(int)>& ready);
  // Waits for the step and returns its loss.
  double finish();

  // Sees every stage's forward output on the compute stream (model/model.h); set between steps.
  void set_probe(StageProbe<float> probe) { probe_ = std::move(probe); }

  const DevicePlan& plan() const { return plan_; }
  int64_t arena_bytes() const { return plan_.peak(); }
  const ParamTable& table() const { return table_; }

 private:
  struct Streams {
    int compute, h2d, d2h;
  };
  ModelConfig cfg_;
  ModelDims dims_;
  ParamTable table_;
  Backend& be_;
  StreamOptions opts_;
  DevicePlan plan_;
  Streams st_;
  char* arena_ = nullptr;
  std::vector<float*> slots_;       // K x [max stage] weights as the device computes with them
  std::vector<float*> grad_slots_;  // 2 x [max stage] fp32 gradients
  ModelWorkspace<float> ws_;
  float *xt_, *target_, *velocity_, *dvelocity_, *context_, *t_;  // inputs [B, C, F, H, W], [B, Lt, td], [B]
  AlignedBuffer<float> host_checkpoints_;  // offload_activations: [num_layers + 1, N, D] in host memory
  // Device buffer of block input k: its own slot, or staging slot k mod 3 when offloaded.
  float* checkpoint(int64_t k) const;
  double loss_ = 0;
  StageProbe<float> probe_;
};

}  // namespace ms
