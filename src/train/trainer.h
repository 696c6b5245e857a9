// `megaslide train`: rectified-flow training of a Wan2.1-style DiT with the state layout of docs/runtime.md
// (bf16 working weights, fp32 master and moments in host pools): every stage resident on the CPU backend
// (--offload none), or streamed through the CPU or CUDA backend (--offload stream). metrics.jsonl,
// checkpoints and OUT/latest are written to the run directory.
#pragma once
#include <string>

#include "runtime/communicator.h"
#include "train/options.h"

namespace ms {

struct TrainSummary {
  int64_t steps_run = 0;
  double first_loss = 0, last_loss = 0;  // means over the first / last 10 % of steps run
  double tokens_per_second = 0;
  int64_t skipped = 0;       // steps whose update was skipped for non-finite loss or gradients
  bool interrupted = false;  // stopped by SIGINT after checkpointing the last finished step
  bool recomputed = true;    // the backward recomputed each block (--recompute; false: activations were kept)
};

// Trains from scratch (or from --model's weights) into opts.out. comm: the ranks of a distributed run, each calling
// this (docs/distributed.md); null: one process.
TrainSummary train(const TrainOptions& opts, const TrainHooks& hooks = {}, Communicator* comm = nullptr);
// Continues the run in `run_dir` from its latest checkpoint up to `steps` total steps (0: the saved target), with
// the options it was started with (hooks are never saved: a resumed run has those given here), the optimizer
// schedule included, on comm's ranks (any number: the state is re-sharded). host_memory: this machine's
// --host-memory (0: the detected limit).
TrainSummary resume(const std::string& run_dir, int64_t steps, const TrainHooks& hooks = {}, int64_t host_memory = 0,
                    Communicator* comm = nullptr);

}  // namespace ms
