// The CUDA kernels of ops/dwconv3d.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/dwconv3d.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/dwconv3d.cu), enqueued on `stream`: x, w, b, y, dy, dx bf16, dw and db fp32.
// Deterministic; scratch holds dwconv3d_backward_scratch(B * T * H * W, C) floats.
namespace ms::cuda {

void dwconv3d_forward(const Dwconv3dParams<uint16_t, float>& p, Stream stream);
void dwconv3d_backward(const Dwconv3dParams<uint16_t, float>& p, const Launch& l);

}  // namespace ms::cuda
