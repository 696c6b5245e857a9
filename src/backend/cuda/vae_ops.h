// The VAE's ops on the GPU (vae/vae_ops.h): the weights uploaded once in fp32 (0.5 GB for Wan2.1's), frames in
// device memory from CUDA's stream-ordered allocator, every convolution as unfolded bands times the weights on
// cuBLASLt with fp32 operands and products (not TF32: Wan runs its VAE in fp32), the norm, softmax and adds in
// kernels of their own (docs/vae.md).
#pragma once
#include <memory>

#include "vae/vae_ops.h"

namespace ms::cuda {

// w must outlive the ops (a weight is found by its offset in w's pool). Throws ms::Error when no GPU can be used or
// when a pass runs out of device memory, naming --vae-tile and --backend cpu.
std::unique_ptr<VaeOps> vae_ops(const VaeWeights& w);

}  // namespace ms::cuda
