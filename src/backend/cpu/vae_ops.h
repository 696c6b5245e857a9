// The VAE's ops on the CPU (runtime/vae_ops.h): frames in host memory, convolutions and the attention's products on
// OpenBLAS, the norm and softmax in plain loops.
#pragma once
#include <cstdint>
#include <memory>

#include "runtime/vae_ops.h"

namespace ms {

// The CPU's attention takes its queries in blocks of this many: its scores [kVaeQueryBlock, N] stay a few MiB, which
// the host-memory ledger of vae/vae_model.cpp counts.
inline constexpr int64_t kVaeQueryBlock = 256;

// w's weights are read where they lie, so w must outlive the ops.
std::unique_ptr<VaeOps> cpu_vae_ops(const VaeWeights& w);

namespace cpu {
// Wan2.2's stage shortcuts in plain loops, an output channel per task (runtime/vae_ops.h has the contracts).
void vae_avg_down(const VaeAvgDownParams& p);
void vae_dup_up(const VaeDupUpParams& p);
}  // namespace cpu

}  // namespace ms
