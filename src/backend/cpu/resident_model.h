// The whole model resident in memory on the CPU, stage after stage (backend/cpu/cpu_stages.h): the reference the
// streamed runtime is bit-identical to, and the --offload none training path of the CPU backend.
#pragma once
#include <cstdint>
#include <vector>

#include "core/aligned.h"
#include "model/config.h"
#include "model/dims.h"
#include "model/model.h"
#include "model/param_table.h"

namespace ms {

template <class T>
class ResidentModel {
 public:
  // The workspace holds a forward and backward at any of `shapes`; they start at the first. keep_acts: every block
  // keeps its activations from the forward, so that the backward recomputes nothing (num_layers - 1 more blocks'
  // activations; the same bits).
  ResidentModel(const ModelConfig& c, const StepShapes& shapes, bool keep_acts = false);

  // The dims of the next forward and backward: one of the shapes, or one at a smaller batch (StepShapes::fits).
  void set_dims(const ModelDims& d);

  // params [table.total()] laid out by ParamTable. latents [B, in_dim, F, H, W], t [Bt] (0..1000; d.time_rows
  // per sample), context [B, Lc, text_dim] -> velocity [B, out_dim, F, H, W].
  void forward(const T* params, const T* latents, const T* t, const T* context, T* velocity);
  // After forward with the same params: grads [table.total()] += dL/dparams given dvelocity;
  // dlatents [B, in_dim, F, H, W] and dcontext [B, Lc, text_dim] are written when non-null.
  void backward(const T* params, const T* dvelocity, T* grads, T* dlatents, T* dcontext);

  void set_probe(StageProbe<T> probe) { probe_ = std::move(probe); }

  const ParamTable& table() const { return table_; }
  const ModelDims& dims() const { return dims_; }
  int64_t workspace_bytes() const { return int64_t((buffer_.size() + kept_buffer_.size()) * sizeof(T)); }
  // What workspace_bytes() is for a model at `shapes`, before one is made.
  static int64_t workspace_bytes(const ModelConfig& c, const StepShapes& shapes, bool keep_acts = false);

 private:
  ModelConfig cfg_;
  StepShapes shapes_;
  ModelDims dims_;  // the current step's
  ParamTable table_;
  // Where block i's activations live: its own kept set, or the workspace's one set (recomputed in the backward).
  const BlockActs<T>& acts(int64_t i) const { return size_t(i) < kept_.size() ? kept_[size_t(i)] : ws_.block; }

  AlignedBuffer<T> buffer_;
  ModelWorkspace<T> ws_;
  AlignedBuffer<T> kept_buffer_;
  std::vector<BlockActs<T>> kept_;  // keep_acts: blocks 0 .. num_layers - 2 (the last one's stay in ws_.block)
  int64_t checkpoint_numel_;        // one block input [N, D] of the largest shape: the stride of xs
  StageProbe<T> probe_;
};

}  // namespace ms
