// Host memory of a training run (docs/runtime.md: "Host memory"): what it needs, by the accounting `plan` uses, checked
// against what this process can get (core/memory_usage.h) before anything large is allocated, so that a run that
// cannot fit stops with numbers and a fix instead of being killed by the kernel.
#pragma once
#include <cstdint>
#include <string>

#include "model/config.h"
#include "model/dims.h"
#include "plan/plan.h"
#include "runtime/backend.h"
#include "train/options.h"
#include "train/run_setup.h"

namespace ms {

struct TrainHostNeed {
  HostPools pools;      // model state (14 bytes per parameter), gradients, offloaded checkpoints (plan/plan.h)
  int64_t compute = 0;  // CPU backend: the streamed arena, or the resident f32 weights and workspace (--offload none)
  int64_t batches = 0;  // the two batches the loop alternates between, the noise and the velocity buffers
  int64_t samples = 0;  // --sample-every: drawing a sample (f32 weights, workspace, gathered weights) and its VAE
  int64_t total() const { return pools.total() + compute + batches + samples; }
  std::string breakdown() const;  // "model state 19.9 GB, gradients 5.69 GB, ..."
};

// What a run with options o allocates in host memory as r resolves it (its backend, schedule, ranks, kept
// activations).
TrainHostNeed train_host_need(const TrainOptions& o, const RunSetup& r, const ModelConfig& c, const StepShapes& shapes);

// Before a run allocates its pools, given r's backend and ranks: resolves r.schedule (--optimizer-schedule auto:
// deferred where the run fits with it, else immediate, which is logged) and r.keep_block_acts (--recompute), checks
// the run's need against host_limit(--host-memory) and logs the model line. Throws ms::Error with the need, the
// limit, where the limit comes from, and the smallest change that fits (resumed: a run that keeps its saved options,
// whose change would be a new run from its checkpoint).
void fit_host_memory(const TrainOptions& o, RunSetup& r, const ModelConfig& c, const StepShapes& shapes,
                     bool resumed = false);

}  // namespace ms
