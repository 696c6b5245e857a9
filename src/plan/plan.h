// `megaslide plan`: will a training run fit, and how fast can it go? Host pools, the device arena (runtime/arena.h),
// traffic per step, FLOPs, lower bounds on the step time from compute, host link and host memory, and the
// smallest change that makes a run fit. Pure accounting: nothing is allocated or measured.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/flops.h"
#include "model/param_table.h"
#include "plan/hardware.h"
#include "plan/kernel_rates.h"
#include "plan/video_shape.h"
#include "runtime/arena.h"
#include "runtime/host_state.h"

namespace ms {

struct PlanInputs {
  ModelConfig model;  // with any --attention / --window override applied
  VideoShape video;
  HardwareProfile hw;                // with any --hbm / --tflops / --link-gbps / --host-mem-gbps override applied
  std::optional<KernelRates> rates;  // --rates FILE read over the defaults; absent: default_kernel_rates(hw)
  ArenaOptions arena;                // prefetch, resident, offload_activations; dtypes and grad slots from hw
  int64_t device_memory = 0;         // --device-memory; 0 (absent): hw.device_bytes - hw.reserve_bytes
  int64_t host_budget = 0;           // --host-memory; 0: hw.host_bytes
  std::optional<OptimizerSchedule> schedule;  // --schedule; absent (auto): deferred where its gradient pool fits
  // --recompute, as train resolves it: a resident run (--offload none) keeps every block's activations (never) or
  // recomputes them (always); auto keeps them where the run then fits. arena.keep_block_acts is set from it.
  Recompute recompute = Recompute::automatic;
  // A distributed run (docs/distributed.md): this many GPUs on each of this many machines, one rank each, the host
  // state sharded over them. Everything below is per GPU, but host memory and its bandwidth, which are per machine.
  int gpus_per_node = 1, nodes = 1;
};

// Host bytes by pool (docs/runtime.md): 14 bytes per parameter of persistent state, plus gradients and, with
// --offload-activations, the block-input checkpoints.
struct HostPools {
  int64_t weights = 0, master = 0, exp_avg = 0, exp_avg_sq = 0;
  int64_t grads = 0;        // fp32 (GradientFloats): deferred, every parameter; immediate and streamed,
                            // kImmediateStaging largest-stage buffers; immediate and resident, every parameter
  int64_t activations = 0;  // checkpoints offloaded to host memory
  int64_t persistent() const { return weights + master + exp_avg + exp_avg_sq; }
  int64_t total() const { return persistent() + grads + activations; }
};

// The host pools of a run with `schedule`, streamed or resident (--offload none), by the rule the runtime allocates
// them with (runtime/host_state.h: gradient_floats): what `plan` reports and `train` checks before it allocates. The
// pools of one rank of `ranks`, which keeps its shard (runtime/shards.h; rank 0's, the largest).
HostPools host_pools(const ParamTable& t, const DevicePlan& dev, OptimizerSchedule schedule, bool streamed,
                     int64_t grad_accum = 1, int ranks = 1);

// Host DRAM bytes AdamW moves per parameter: reads grad, master, exp_avg, exp_avg_sq (16), writes master,
// exp_avg, exp_avg_sq (12) and the bf16 working weight (2).
constexpr int kOptimizerBytesPerParam = 30;

struct Traffic {
  int64_t h2d_weights = 0;      // forward, and the backward's reloads (the last K forward stages stay in slots)
  int64_t h2d_activations = 0;  // offloaded checkpoints brought back for the recompute
  int64_t d2h_grads = 0;        // fp32 gradients of every parameter (0 when they accumulate in host memory)
  int64_t d2h_activations = 0;  // checkpoints sent to host memory in the forward
  int64_t h2d() const { return h2d_weights + h2d_activations; }
  int64_t d2h() const { return d2h_grads + d2h_activations; }
};

// One step's link traffic: weights up (the backward starts with the last K forward stages still in their
// slots, as slot_uses in src/runtime keeps them), gradients and offloaded checkpoints.
Traffic step_traffic(const ParamTable& t, const DevicePlan& dev, const ArenaOptions& o);

// A distributed step's collectives, per GPU: each stage upload's all-gather of the other ranks' bf16 chunks and each
// backward's reduce-scatter of the fp32 gradients, both (ranks - 1) / ranks of a stage, over NVLink within a
// machine or, with several machines, at the network's rate (a ring is as fast as its slowest link).
struct Collectives {
  int64_t gather_bytes = 0, scatter_bytes = 0;  // received by the all-gathers, sent by the reduce-scatters
  double bytes_per_s = 0;                       // the rate they run at
  double gather_s = 0, scatter_s = 0;
};

// The compute bound by kernel family: executed FLOPs (recompute included) at the family's rate, and the memory-bound
// passes' bytes at theirs.
struct ComputeTime {
  double gemm = 0, attention = 0, dsa = 0, memory = 0;
  double total() const { return gemm + attention + dsa + memory; }
};

struct Bounds {            // seconds per step
  double compute = 0;      // ComputeTime::total: the kernels run one after another
  double link = 0;         // the busier direction of the full-duplex host link, with the collectives that share its
                           // stream (all-gathers after uploads, reduce-scatters before downloads)
  double host_memory = 0;  // AdamW plus every DMA byte through host DRAM (of every GPU of the machine)
};

struct Plan {
  PlanInputs in;
  LatentShape latent;
  int64_t params = 0, stem_params = 0, block_params = 0, head_params = 0;  // block: each of num_layers
  DevicePlan device;
  int64_t device_budget = 0;
  OptimizerSchedule schedule = OptimizerSchedule::deferred;  // the optimizer schedule planned
  int ranks = 1;                                             // gpus_per_node x nodes
  HostPools host;                                            // one rank's
  int64_t host_needed = 0;  // host pools, plus the device arena when device memory is host memory (cpu); of every
                            // rank on a machine
  int64_t host_budget = 0;
  Traffic traffic;  // one GPU's: its shards of the weights up, of the gradients down
  Collectives collectives;
  int64_t host_dram_bytes = 0;  // host DRAM traffic per step: AdamW and DMA, of every rank on a machine
  Flops flops;                  // executed (blocks 4x forward with recompute)
  Flops model_flops;            // 3x forward: what MFU counts
  double memory_bytes = 0;      // the memory-bound passes' device-memory traffic (step_memory_bytes)
  KernelRates rates;            // what the compute bound used
  ComputeTime compute;
  Bounds bounds;
  double step_s = 0;               // perfect overlap: the largest bound
  double step_serial_s = 0;        // no overlap: compute, then each link direction, then the optimizer
  double mfu = 0, mfu_serial = 0;  // model FLOPs over the step at the profile's peak rate
  std::string bound_by;            // compute | host link | host memory
  bool fits = false;
  std::vector<std::string> reasons;  // why not
  std::string suggestion;            // the smallest change that makes it fit ("" when it fits)
  std::vector<std::string> notes;    // padding, assumptions
};

// Throws ms::Error for bad inputs (sizes, strides, schedule names, budgets), naming the value and the fix.
Plan make_plan(const PlanInputs& in);

}  // namespace ms
