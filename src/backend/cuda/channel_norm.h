// The CUDA forward of ops/channel_norm.h (the VAE's channel RMS norm, then SiLU when silu), in fp32.
#pragma once
#include <cstdint>

#include "ops/channel_norm.h"

struct CUstream_st;

namespace ms::cuda {

// x [C, N] (N pixels per channel plane), gamma [C] -> y [C, N] (may be x); enqueued on `stream`.
void channel_rms_norm_forward(const float* x, const float* gamma, float* y, int64_t C, int64_t N, bool silu,
                              CUstream_st* stream);

}  // namespace ms::cuda
