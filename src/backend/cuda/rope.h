// The CUDA kernels of ops/rope.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/rope.h"

// The CUDA kernels (backend/cuda/rope.cu) on bf16 [B, F, H, W, nh, d], angles in float64, enqueued on
// `stream`; y may alias x and dx may alias dy.
namespace ms::cuda {

void rope_forward(const RopeParams<uint16_t>& p, Stream stream);
void rope_backward(const RopeParams<uint16_t>& p, Stream stream);

}  // namespace ms::cuda
