// Depthwise 3D convolution, 3x3x3 taps, stride 1, zero padding 1 (torch Conv3d(C, C, 3, padding=1, groups=C)),
// on channels-last video tokens: the DSA offset network's first layer.
#pragma once
#include <cstdint>

namespace ms {

// A = the activations' and weights' element type, G = the weight gradients' (T on the CPU; bf16 and fp32 on the
// GPU). The forward reads x, w, b and writes y; the backward reads x, w, dy and accumulates into dx, dw, db. dx is
// gathered per token; dw and db are reduced per channel block: deterministic.
template <class A, class G = A>
struct Dwconv3dParams {
  const A* x = nullptr;   // [B, T, H, W, C]
  const A* w = nullptr;   // [C, 1, 3, 3, 3] (= [C, 27], taps t-major)
  const A* b = nullptr;   // [C] or null
  A* y = nullptr;         // [B, T, H, W, C] (overwritten)
  const A* dy = nullptr;  // [B, T, H, W, C]
  A* dx = nullptr;        // += (skipped when null)
  G* dw = nullptr;        // [C, 27] +=
  G* db = nullptr;        // [C] += (skipped when null)
  int64_t B = 0, Tn = 0, H = 0, W = 0, C = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void dwconv3d_forward(const Dwconv3dParams<T>& p);
// Inverts dwconv3d_forward.
template <class T>
void dwconv3d_backward(const Dwconv3dParams<T>& p);

}  // namespace ms::cpu
