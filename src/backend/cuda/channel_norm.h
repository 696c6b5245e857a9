// The CUDA forward of ops/channel_norm.h (the VAE's channel RMS norm, then SiLU when silu), in fp32.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/channel_norm.h"

namespace ms::cuda {

// x [C, N] (N pixels per channel plane), gamma [C] -> y [C, N] (may be x); enqueued on `stream`.
void channel_rms_norm_forward(const ChannelNormParams<float>& p, Stream stream);

}  // namespace ms::cuda
