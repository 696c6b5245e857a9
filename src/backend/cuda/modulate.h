// The CUDA kernels of ops/modulate.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/modulate.h"
#include "runtime/reduction_scratch.h"

// The CUDA kernels (backend/cuda/modulate.cu), enqueued on `stream`: x, y, dy, dx, out, dout bf16 activations;
// shift, scale, gate and their gradients fp32 (the modulation comes from the fp32 time embedding). The
// per-sample sums over L go through the launch's scratch [modulate_backward_scratch(L, C)] in a fixed order.
namespace ms::cuda {

void modulate_forward(const ModulateParams<uint16_t, float>& p, Stream stream);
void modulate_backward(const ModulateParams<uint16_t, float>& p, const Launch& l);
void gate_residual_forward(const GateResidualParams<uint16_t, float>& p, Stream stream);
void gate_residual_backward(const GateResidualParams<uint16_t, float>& p, const Launch& l);
// The modulation: param bf16 (a weight), e, mod and the gradients fp32; the same sums in the same order as the CPU.
void modulation_forward(const ModulationParams<uint16_t, float>& p, Stream stream);
void modulation_backward(const ModulationParams<uint16_t, float>& p, Stream stream);

}  // namespace ms::cuda
