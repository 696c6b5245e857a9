// FLOP accounting (a multiply-add counts 2). Shared by `bench` (MFU) and the planner.
#pragma once
#include "model/config.h"
#include "model/dims.h"

namespace ms {

struct Flops {
  double gemm = 0;       // linear layers (the patch embedding and DSA's offset_proj included)
  double attention = 0;  // dense, window and cross attention: q.k scores and probability-weighted values
  double dsa = 0;        // dsa and dsa_fixed self-attention (trilinear sampling) and DSA's depthwise offset conv
  double total() const { return gemm + attention + dsa; }
};

// Keys one query attends to in self-attention (per head) over a token grid of extents (t, h, w): every token for
// dense; for window, dsa and dsa_fixed the window clipped to the grid, prod min(k, E) (windows slide inward or are
// cut at the borders).
double self_attention_keys(const AttentionConfig& a, const std::array<int64_t, 3>& grid);
inline double self_attention_keys(const ModelConfig& c, const ModelDims& d) {
  return self_attention_keys(c.attention, {d.f, d.h, d.w});
}
// Forward FLOPs of self-attention per query and channel of the head dims (x L x nh x d for a layer): scores and
// values, 4 per key; dsa 8 times that (each slot's score and value combine 8 trilinear corners, as the fused
// kernel does). What `plan`, `bench` and `bench attention` count.
double self_attention_forward_flops(const AttentionConfig& a, const std::array<int64_t, 3>& grid);

// One forward pass. Self-attention per query, head dim summed over heads to D: dense and window 4 L' D
// (scores + values over L' keys); dsa_fixed the same over its P' integer-position slots; dsa 32 P' D (scores
// and values each combine 8 trilinear corners, as the fused kernel does) plus the offset network (27-tap
// depthwise conv, offset_proj GEMM).
Flops forward_flops(const ModelConfig& c, const ModelDims& d);

// One training step with block recomputation: the backward costs twice the forward and every block
// runs its forward twice (once in the forward pass, once recomputed), so blocks count 4x and the
// stem and head 3x their forward. What the hardware executes.
Flops train_step_flops(const ModelConfig& c, const ModelDims& d);

// One training step without the recomputation, 3x the forward: the model FLOPs that MFU counts.
Flops model_step_flops(const ModelConfig& c, const ModelDims& d);

// Bytes the memory-bound passes of one training step move through device memory (an estimate, for `plan`'s kernel
// rates): per block forward, 25 reads or writes of the [N, dim] activations (the norms with their modulation, the
// q/k norms, RoPE on q and k, three gated residuals) and 2 of the FFN's [N, ffn_dim] (its GELU); the backward twice
// that, and with `recompute` every block's forward once more. act_bytes per element.
double step_memory_bytes(const ModelConfig& c, const ModelDims& d, int act_bytes, bool recompute);

}  // namespace ms
