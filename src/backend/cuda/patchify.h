// The CUDA kernels of ops/patchify.h.
#pragma once
#include <cstdint>

#include "ops/patchify.h"

struct CUstream_st;

// The CUDA kernels (backend/cuda/patchify.cu), enqueued on `stream`: the video side (latents, the predicted
// velocity and their gradients) is fp32, the token side bf16, so each re-layout also converts.
namespace ms::cuda {

void patchify_forward(const float* latents, uint16_t* patches, const PatchDims& d, CUstream_st* stream);
void patchify_backward(const uint16_t* dpatches, float* dlatents, const PatchDims& d, CUstream_st* stream);
void unpatchify_forward(const uint16_t* tokens, float* video, const PatchDims& d, CUstream_st* stream);
void unpatchify_backward(const float* dvideo, uint16_t* dtokens, const PatchDims& d, CUstream_st* stream);

}  // namespace ms::cuda
