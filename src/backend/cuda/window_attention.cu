#include "backend/cuda/flash_attention.h"
#include "backend/cuda/window_attention.h"
#include "core/check.h"

namespace ms::cuda {
namespace {

AttentionDims sequence(const VideoAttentionDims& d) { return {d.B, d.L(), d.L(), d.nh, d.d}; }

}  // namespace

void window_attention_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                              const VideoAttentionDims& dims, const std::array<int64_t, 3>& window, bool shifted,
                              Stream stream) {
  MS_CHECK(dims.d <= kFlashMaxHeadDim, "cuda window attention: head dim ", dims.d, " is over ", kFlashMaxHeadDim);
  flash_attention_forward(q, k, v, out, lse, window_rows(dims, window, shifted), stream);
}

void window_attention_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* out,
                               const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* dk, uint16_t* dv,
                               float* scratch, const VideoAttentionDims& dims, const std::array<int64_t, 3>& window,
                               bool shifted, Stream stream) {
  MS_CHECK(dims.d <= kFlashMaxHeadDim, "cuda window attention: head dim ", dims.d, " is over ", kFlashMaxHeadDim);
  attention_delta(out, dout, scratch, sequence(dims), stream);
  flash_attention_backward(q, k, v, lse, dout, scratch, dq, dk, dv, window_rows(dims, window, shifted), stream);
}

}  // namespace ms::cuda
