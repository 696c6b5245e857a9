// The VAE's ops on the GPU (runtime/vae_ops.h): the weights uploaded once in fp32 (0.5 GB for Wan2.1's), frames in
// device memory from CUDA's stream-ordered allocator, every convolution as unfolded bands times the weights on
// cuBLASLt with fp32 operands and products (not TF32: Wan runs its VAE in fp32), the norm, softmax and adds in
// kernels of their own (docs/vae.md).
#pragma once
#include <cstdint>
#include <memory>

#include "runtime/vae_ops.h"

namespace ms::cuda {

// w must outlive the ops (a weight is found by its offset in w's pool). score_floats: the attention's block of scores
// (queries go in blocks of score_floats / pixels; tests make it small to split a frame). The caller has checked that a
// GPU can be used (registry's make_vae_ops); a pass that runs out of device memory throws ms::Error naming
// --vae-tile and --backend cpu.
inline constexpr int64_t kVaeScoreFloats = int64_t(1) << 26;  // 256 MiB
std::unique_ptr<VaeOps> vae_ops(const VaeWeights& w, int64_t score_floats = kVaeScoreFloats);

}  // namespace ms::cuda
