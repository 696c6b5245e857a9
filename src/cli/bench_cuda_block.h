// `megaslide bench cuda`'s block section (CUDA builds only): one Wan2.1-14B-shaped block's forward and
// backward on the GPU (cuda::block_forward / block_backward; dense self-attention through the
// flash-style kernels), timed with CUDA events, with the attention kernels also timed alone.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace ms::cuda {
class GemmContext;
}

namespace ms::cli {

// n bf16 values on the device from a repeated random tile (never zeros or constants: they make GEMMs run
// faster than real data), copied on `stream` (the one the kernels run on: the legacy stream's copies are not ordered
// with a non-blocking stream) and complete on return.
void fill_random_bf16(uint16_t* device, int64_t n, cudaStream_t stream);
// n bf16 values on the device: `tile` repeated; likewise on `stream`.
void fill_tiled_bf16(uint16_t* device, int64_t n, const std::vector<uint16_t>& tile, cudaStream_t stream);

// grid: one sample's token grid (f, h, w). Returns tokens, forward_s, backward_s, step_s (forward +
// backward, which recomputes the forward), attention_step_s (the attention kernels' share: two forwards and
// a backward, timed alone), gemm_flops (the block's linear layers, one forward) and attention_flops.
nlohmann::json bench_cuda_block(cuda::GemmContext& gemm, const std::array<int64_t, 3>& grid, int repeats,
                                cudaStream_t stream);

}  // namespace ms::cli
