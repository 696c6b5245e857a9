// The whole model's activation workspace (stem, blocks' inputs, one block's recompute buffers, head) and its
// visitor, and the stage probe: what ResidentModel (backend/cpu/resident_model.h) and the streamed runtime lay
// out. Blocks keep only their inputs from the forward and recompute the rest in the backward.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

#include "core/aligned.h"
#include "model/block.h"
#include "model/head.h"
#include "model/param_table.h"
#include "model/stem.h"
#include "model/workspace.h"

namespace ms {

// A: activations, S: statistics and the time path (model/block.h).
template <class A, class S = A>
struct ModelWorkspace {
  StemActs<A, S> stem;
  BlockActs<A, S> block;
  BlockGrads<A, S> block_grads;
  HeadActs<A, S> head;
  A* xs;            // [num_layers + 1 (or 3 staging slots), N, D] block inputs (checkpoints) and the head input
  A* dres;          // [N, D] gradient of the residual stream
  S* de;            // [Bt, D]
  S* de0;           // [Bt, 6, D]
  A* dctx;          // [B, Lt, D]
  A* scratch;       // stem / head backward scratch (activations; on the CPU their statistics too)
  S* stat_scratch;  // split scratch: the stem's and head's statistics scratch
  S* reduction;     // split scratch: the backend's deterministic reductions
};

// How a backend lays the workspace out.
struct WorkspaceLayout {
  int64_t checkpoint_slots = -1;  // [N, D] block-input buffers in xs: -1 for num_layers + 1 (3 staging slots when
                                  // the checkpoints are offloaded to host memory)
  bool fused_norm = false;        // Ops::kFusedNormModulate: ln1, ln2 and the head's ln are not allocated
  // -1: one scratch serves the stem's and head's backward, statistics included (the CPU); >= 0: the scratch holds
  // activations only, stat_scratch the statistics, and `reduction` this many elements for the backend's sums.
  int64_t reduction_scratch = -1;
};

template <class A, class S, class F>
void visit_model_workspace(const ModelConfig& c, const ModelDims& d, ModelWorkspace<A, S>& ws, F&& f,
                           const WorkspaceLayout& l = {}) {
  visit_stem_acts(c, d, ws.stem, f);
  visit_block_acts(c, d, ws.block, f, l.fused_norm);
  visit_block_grads(c, d, ws.block_grads, f);
  visit_head_acts(c, d, ws.head, f, l.fused_norm);
  f((l.checkpoint_slots < 0 ? c.num_layers + 1 : l.checkpoint_slots) * d.N() * c.dim, ws.xs);
  f(d.N() * c.dim, ws.dres);
  f(d.Bt() * c.dim, ws.de);
  f(d.Bt() * 6 * c.dim, ws.de0);
  f(d.B * d.Lt * c.dim, ws.dctx);
  const bool split = l.reduction_scratch >= 0;
  f(split ? std::max(stem_scratch_act_numel(c, d), head_scratch_act_numel(c, d))
          : std::max(stem_scratch_numel(c, d), head_scratch_numel(c, d)),
    ws.scratch);
  f(split ? std::max(stem_scratch_stat_numel(c, d), head_scratch_stat_numel(c, d)) : 0, ws.stat_scratch);
  f(split ? l.reduction_scratch : 0, ws.reduction);
}

// The model workspace laid out once for every shape of a run (model/workspace.h: shapes_visitor).
template <class WS>
auto model_workspace_visitor(const ModelConfig& c, const StepShapes& shapes, const WorkspaceLayout& l = {}) {
  return shapes_visitor<WS>(shapes,
                            [&c, l](const ModelDims& d, auto& ws, auto&& f) { visit_model_workspace(c, d, ws, f, l); });
}

// Called with each stage's forward output as soon as it is computed, in stage order on the thread (stream)
// that computes it: stage 0 the stem's x0 [N, D], stage i + 1 block i's output [N, D], the head the velocity
// [B, out_dim, F, H, W]. It may read it (the trainer's non-finite check) or change it (fault injection).
template <class T>
using StageProbe = std::function<void(int64_t stage, T* out, int64_t n)>;

}  // namespace ms
