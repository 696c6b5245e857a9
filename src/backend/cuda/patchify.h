// The CUDA kernels of ops/patchify.h.
#pragma once
#include <cstdint>

#include "backend/cuda/device.h"
#include "ops/patchify.h"

// The CUDA kernels (backend/cuda/patchify.cu), enqueued on `stream`: the video side (latents, the predicted
// velocity and their gradients) is fp32, the token side bf16, so each re-layout also converts.
namespace ms::cuda {

void patchify_forward(const PatchifyParams<float, uint16_t>& p, Stream stream);
void patchify_backward(const PatchifyParams<float, uint16_t>& p, Stream stream);
void unpatchify_forward(const UnpatchifyParams<uint16_t, float>& p, Stream stream);
void unpatchify_backward(const UnpatchifyParams<uint16_t, float>& p, Stream stream);

}  // namespace ms::cuda
