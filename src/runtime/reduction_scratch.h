// The fp32 scratch that the CUDA kernels' deterministic reductions take: sizes only, plain arithmetic, compiled in
// every build so that `megaslide plan` lays out the GPU's arena exactly as the CUDA backend carves it. The kernels'
// own size functions (linear_backward_scratch, ...) are declared and defined here, and the kernels' headers include
// them.
#pragma once
#include <cstdint>

#include "model/config.h"
#include "model/dims.h"
#include "ops/attention.h"
#include "ops/dsa.h"

namespace ms::cuda {

constexpr int64_t kColumnRows = 64;   // rows per partial in the column reduction
constexpr int64_t kDwconvRows = 256;  // tokens per partial of the depthwise convolution's weight gradient

// Column sums in a fixed order (partials over kColumnRows rows, then over the partials): N x C inputs.
inline int64_t column_scratch(int64_t N, int64_t C) { return (N + kColumnRows - 1) / kColumnRows * C; }

// Each CUDA kernel's scratch in floats, for the arguments of its call (backend/cuda/<op>.h).
int64_t attention_backward_scratch(const AttentionDims& a);
int64_t dsa_backward_scratch(const VideoAttentionDims& dims, const DsaArgs& a);
int64_t dwconv3d_backward_scratch(int64_t N, int64_t C);
int64_t layernorm_backward_scratch(int64_t N, int64_t C);
int64_t layernorm_modulate_backward_scratch(int64_t L, int64_t C);
int64_t linear_backward_scratch(int64_t N, int64_t out);
int64_t modulate_backward_scratch(int64_t L, int64_t C);
int64_t rmsnorm_backward_scratch(int64_t N, int64_t C);

// The scratch one block's backward needs on the GPU: the largest of its ops'.
int64_t block_reduction_scratch(const ModelConfig& c, const ModelDims& d);

}  // namespace ms::cuda
