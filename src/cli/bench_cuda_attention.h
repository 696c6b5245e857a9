// `megaslide bench cuda`'s attention section (CUDA builds only): dense, window, dsa_fixed and dsa self-attention,
// forward and backward, at Wan2.1-14B head sizes (40 heads of 128) over token counts, timed with CUDA events, with
// their achieved TFLOP/s. Token grids: Wan2.1's 81 frames for 32,760 (21 x 30 x 52, 480p) and 75,600 tokens
// (21 x 45 x 80, 720p); else T x 32 x 32 up to 32k tokens, T x 64 x 64 above (L a multiple of 1024).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

namespace ms::cuda {
class GemmContext;
}

namespace ms::cli {

// One entry per (type, token count), each also passed to `measured` as soon as it is measured (a cut run keeps
// what it measured): type, tokens, grid, forward_s, backward_s, forward_tflops, step_tflops
// (forward + backward; the backward counts 2.5 forwards), and the memory floor: forward_floor_bytes and
// backward_floor_bytes (every input and output read or written once: q, k, v, out, lse, and DSA's offsets; the
// backward's out, dout, lse and the five gradients) and floor_gbps, those bytes over the step's time (against the same
// run's device copy rate: how far from memory-bound). FLOPs as model/flops.h counts them: 4 L L' D over the L'
// keys a query attends to (L for dense, the clipped window's for window and dsa_fixed), 32 L P' D for dsa (eight
// trilinear corners per slot). Dense runs up to dense_max tokens only (quadratic: 128k tokens take minutes); dsa
// gets random offsets uniform within the default offset_range (1, 2, 2). The window is the default's, 3 x 3 x 3.
// The kernels run through the model's attention dispatch (model/attention_core.h) on the CUDA ops policy.
nlohmann::json bench_cuda_attention(cuda::GemmContext& gemm, const std::vector<int64_t>& tokens, int64_t dense_max,
                                    int repeats, cudaStream_t stream,
                                    const std::function<void(const nlohmann::json&)>& measured);

}  // namespace ms::cli
