// FLOP accounting (a multiply-add counts 2). Shared by `bench` (MFU) and the planner.
#pragma once
#include "model/config.h"
#include "model/dims.h"

namespace ms {

struct Flops {
  double gemm = 0;       // linear layers (and the patch embedding)
  double attention = 0;  // q.k scores and probability-weighted values, self and cross
  double total() const { return gemm + attention; }
};

// One forward pass.
Flops forward_flops(const ModelConfig& c, const ModelDims& d);

// One training step with block recomputation: the backward costs twice the forward and every block
// runs its forward twice (once in the forward pass, once recomputed), so blocks count 4x and the
// stem and head 3x their forward.
Flops train_step_flops(const ModelConfig& c, const ModelDims& d);

}  // namespace ms
