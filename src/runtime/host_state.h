// Host-resident training state (docs/runtime.md): one page-aligned allocation per pool, laid out by the
// parameter table, so a stage is one span of every pool. 14 bytes per parameter (bf16 working
// weights, fp32 master, exp_avg, exp_avg_sq) plus the fp32 gradient pool. Every pool starts zero (moments
// included) and is resident only as far as it has been written.
#pragma once
#include <cstdint>

#include "core/aligned.h"
#include "model/param_table.h"
#include "runtime/arena.h"
#include "runtime/shards.h"

namespace ms {

// The fp32 gradient buffers a run's schedule keeps in host memory (docs/runtime.md), in floats; a rank of a
// distributed run keeps its shard's (runtime/shards.h).
struct GradientFloats {
  int64_t pool = 0;      // HostState::grads: every parameter of the shard (deferred; streamed with --grad-accum > 1
                         // also kImmediateStaging stage-shard-sized buffers a later micro-batch's gradients land in
                         // before they are added), kImmediateStaging such buffers (immediate, streamed), or none
  int64_t backward = 0;  // resident (--offload none), immediate, --grad-accum > 1 or several ranks: the backward's
                         // own pool of every parameter
  int64_t total() const { return pool + backward; }
};
GradientFloats gradient_floats(const ParamTable& table, const Shards& shards, OptimizerSchedule schedule, bool streamed,
                               int64_t grad_accum);

struct HostState {
  // The pools of the shard's numel elements (P for a single rank); grad_numel: the gradient pool (every element
  // under the deferred schedule; a few stage-sized staging buffers under the immediate one).
  HostState(int64_t numel, int64_t grad_numel);

  AlignedBuffer<uint16_t> weights;  // [P] bf16 working weights (what the device computes with)
  AlignedBuffer<float> master;      // [P] fp32 master weights
  AlignedBuffer<float> exp_avg;     // [P] AdamW first moment
  AlignedBuffer<float> exp_avg_sq;  // [P] AdamW second moment
  AlignedBuffer<float> grads;       // [grad_numel] fp32 gradients of the current step (or staging)

  int64_t numel() const { return int64_t(master.size()); }
  int64_t bytes() const { return numel() * (2 + 3 * 4) + int64_t(grads.size()) * 4; }
  // Rounds master to the bf16 working weights.
  void refresh_weights();
};

}  // namespace ms
