#include "cli/bench_cuda_attention.h"

#include <memory>

#include "backend/cuda/check.h"
#include "cli/bench_cuda_block.h"
#include "cli/cuda_timing.h"
#include "model/config.h"
#include "ops/attention.h"

namespace ms::cli {

nlohmann::json bench_cuda_attention(const std::vector<int64_t>& tokens, int repeats, cudaStream_t stream) {
  const ModelConfig c = preset_config("wan2.1-14b");
  nlohmann::json out = nlohmann::json::array();
  for (int64_t L : tokens) {
    const cpu::AttentionDims a{1, L, L, c.num_heads, c.head_dim()};
    const int64_t n = L * c.dim;
    void* base = nullptr;  // q, k, v, out, dout, dq, dk, dv bf16; lse and the backward's scratch fp32
    const size_t floats = size_t(a.B * a.nh * L + cuda::attention_backward_scratch(a));
    MS_CUDA_CHECK(cudaMalloc(&base, size_t(8 * n) * 2 + floats * 4));
    const std::unique_ptr<void, cudaError_t (*)(void*)> held(base, cudaFree);
    uint16_t* t[8];
    for (int i = 0; i < 8; ++i) t[i] = static_cast<uint16_t*>(base) + i * n;
    float* lse = reinterpret_cast<float*>(t[7] + n);
    float* scratch = lse + a.B * a.nh * L;
    for (int i : {0, 1, 2, 4}) fill_random_bf16(t[i], n);
    MS_CUDA_CHECK(cudaMemset(t[5], 0, size_t(3 * n) * 2));
    const double fwd =
        time_events(stream, repeats, [&] { cuda::attention_forward(t[0], t[1], t[2], t[3], lse, a, stream); });
    const double bwd = time_events(stream, repeats, [&] {
      cuda::attention_backward(t[0], t[1], t[2], t[3], lse, t[4], t[5], t[6], t[7], scratch, a, stream);
    });
    const double flops = 4.0 * double(L) * double(L) * double(c.dim);  // q k^T and p v, over every head
    out.push_back({{"tokens", L},
                   {"forward_s", fwd},
                   {"backward_s", bwd},
                   {"forward_tflops", flops / fwd / 1e12},
                   {"step_tflops", 3.5 * flops / (fwd + bwd) / 1e12}});
  }
  return out;
}

}  // namespace ms::cli
