// The fp32 scratch that the CUDA kernels' deterministic reductions take: sizes only, plain arithmetic, compiled in
// every build so that `megaslide plan` lays out the GPU's arena exactly as the CUDA backend carves it. The kernels'
// own size functions (linear_backward_scratch, ... in src/ops/<op>.h) are defined here too.
#pragma once
#include <cstdint>

#include "model/config.h"
#include "model/dims.h"

namespace ms::cuda {

constexpr int64_t kColumnRows = 64;   // rows per partial in the column reduction
constexpr int64_t kDwconvRows = 256;  // tokens per partial of the depthwise convolution's weight gradient

// Column sums in a fixed order (partials over kColumnRows rows, then over the partials): N x C inputs.
inline int64_t column_scratch(int64_t N, int64_t C) { return (N + kColumnRows - 1) / kColumnRows * C; }

// The scratch one block's backward needs on the GPU: the largest of its ops'.
int64_t block_reduction_scratch(const ModelConfig& c, const ModelDims& d);

}  // namespace ms::cuda
