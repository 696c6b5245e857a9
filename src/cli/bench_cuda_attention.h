// `megaslide bench cuda`'s attention section (CUDA builds only): dense self-attention forward and backward at
// Wan2.1-14B head sizes (40 heads of 128) over token counts, timed with CUDA events, and its achieved TFLOP/s.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace ms::cli {

// One entry per token count: tokens, forward_s, backward_s, forward_tflops, step_tflops (forward + backward; the
// backward counts 2.5 forwards: five L x L x d products against two).
nlohmann::json bench_cuda_attention(const std::vector<int64_t>& tokens, int repeats, cudaStream_t stream);

}  // namespace ms::cli
