// Swin-style 3D window attention (docs/attention.md `window`, Video Swin Transformer): the token grid is cut into
// non-overlapping kt x kh x kw windows and every token attends to the tokens of its own window.
//
// Per axis with extent E and window k, as Video Swin's get_window_size: when k >= E the window is the whole axis
// and there is no shift; otherwise k' = k and the shift is s = k/2 when `shifted` (odd blocks), else 0. Video
// Swin pads the grid at the end to a multiple of k', rolls it by -s, partitions it into windows and masks pairs
// from different pre-roll regions; here the padding is masked too. In the original coordinates that is exactly:
// tokens attend within cells [o + m*k', o + (m+1)*k') clipped to [0, E), o = s - k' when s > 0, else 0 (the
// wrapped corner pieces of the rolled grid are their own cells). No roll, no padding buffers.
#pragma once
#include <array>
#include <cstdint>

#include "ops/attention.h"

namespace ms {

// q, k, v, out, dout and the gradients [B, T, H, W, nh, d]; lse [B, nh, L].
template <class A, class S = A>
struct WindowAttentionParams {
  AttentionTensors<A, S> t;
  VideoAttentionDims dims{};
  std::array<int64_t, 3> window{};  // kt, kh, kw
  bool shifted = false;             // this layer's windows are shifted (odd blocks, when the config shifts)
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void window_attention_forward(const WindowAttentionParams<T>& p);

// Inverts window_attention_forward from its saved out and lse: dq, dk, dv +=. Every token belongs to one cell and
// each cell is one task: deterministic.
template <class T>
void window_attention_backward(const WindowAttentionParams<T>& p);

}  // namespace ms::cpu
