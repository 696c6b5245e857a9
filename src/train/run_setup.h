// What one start of a run derives from its options, resolved once (resolve_run) before anything large is allocated
// and read by the host-memory check, the training step and the runtime: the options themselves stay as the user gave
// them (train/options.h).
#pragma once
#include "model/config.h"
#include "model/dims.h"
#include "runtime/communicator.h"
#include "runtime/runtime_options.h"
#include "train/options.h"

namespace ms {

struct RunSetup {
  BackendKind backend = BackendKind::cpu;
  OptimizerSchedule schedule = OptimizerSchedule::deferred;  // --optimizer-schedule, auto resolved
  bool keep_block_acts = false;    // --recompute resolved: a resident run's blocks keep their forward activations
  int ranks = 1, local_ranks = 1;  // a distributed run's ranks, and those on this machine
};

// The backend this run computes on: cpu, or cuda where it is asked for (or auto) and the run can use the GPU
// (--offload stream, a usable GPU, kernels that take the model, no CPU-only aid). Throws ms::Error when cuda is
// asked for and cannot be used, saying why.
BackendKind resolve_backend(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c);

// The run's setup on comm's ranks: its backend (resolve_backend), then its schedule and recompute, checked against
// host memory (fit_host_memory, train/memory_fit.h). Every rank must resolve them alike, or all stop naming the
// option to give explicitly.
RunSetup resolve_run(const TrainOptions& o, const TrainHooks& hooks, const ModelConfig& c, const StepShapes& shapes,
                     bool resumed, Communicator& comm);

}  // namespace ms
