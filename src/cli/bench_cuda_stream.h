// `megaslide bench cuda`'s streamed-step section (CUDA builds only): training steps of a Wan2.1-14B-shaped model
// (fewer blocks) through StreamedModel on the CUDA backend, with the weights in host memory several times larger
// than the device arena: step time with prefetch (copies overlapped) and serialized (every copy waits for the
// compute before it and vice versa), the copies alone, the share of the transfer time hidden, MFU, and the device
// memory in use against the arena plan and the budget. On an H100 or H200, also the model FLOPs' MFU at the datasheet
// peak beside what `plan` predicts for the same model, tokens and card (its default kernel rates).
#pragma once
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"

namespace ms::cli {

struct StreamBenchShape {
  std::array<int64_t, 3> grid{8, 16, 16};          // one sample's token grid (f, h, w)
  int64_t layers = 8;                              // blocks of Wan2.1-14B's shape
  int repeats = 3;                                 // timed steps per mode, after one warm-up
  AttentionType attention = AttentionType::dense;  // the blocks' self-attention
};

// gemm_ceiling: the bf16 GEMM rate (FLOP/s) measured in the same run; device: the GPU's name (cudaDeviceProp).
nlohmann::json bench_cuda_stream(const StreamBenchShape& s, double gemm_ceiling, const std::string& device);

}  // namespace ms::cli
