#include "backend/cuda/flash_attention.h"
#include "backend/cuda/window_attention.h"
#include "core/check.h"

namespace ms::cuda {
namespace {

AttentionDims sequence(const VideoAttentionDims& d) { return {d.B, d.L(), d.L(), d.nh, d.d}; }

}  // namespace

void window_attention_forward(const WindowAttentionParams<uint16_t, float>& p, const Launch& l) {
  MS_CHECK(p.dims.d <= kFlashMaxHeadDim, "cuda window attention: head dim ", p.dims.d, " is over ", kFlashMaxHeadDim);
  flash_attention_forward(p.t, window_rows(p.dims, p.window, p.shifted), l.stream);
}

void window_attention_backward(const WindowAttentionParams<uint16_t, float>& p, const Launch& l) {
  MS_CHECK(p.dims.d <= kFlashMaxHeadDim, "cuda window attention: head dim ", p.dims.d, " is over ", kFlashMaxHeadDim);
  const AttentionDims a = sequence(p.dims);
  float* delta = l.scratch_for(attention_backward_scratch(a));
  attention_delta(p.t.out, p.t.dout, delta, a, l.stream);
  flash_attention_backward(p.t, delta, window_rows(p.dims, p.window, p.shifted), l.stream);
}

}  // namespace ms::cuda
