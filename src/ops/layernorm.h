// LayerNorm over the last dim: y = (x - mean) * rstd [* w + b], rstd = 1/sqrt(var + eps) (biased var).
#pragma once
#include <cstdint>

namespace ms {

// A = the activations' and weights' element type, S = the statistics' and weight gradients' (T on the CPU; bf16 and
// fp32 on the GPU). The forward reads x, w, b and writes y, mean, rstd; the backward reads x, w, mean, rstd, dy and
// accumulates into dx, dw, db.
template <class A, class S = A>
struct LayerNormParams {
  const A* x = nullptr;   // [N, C]
  const A* w = nullptr;   // [C]; w and b may both be null (no affine)
  const A* b = nullptr;   // [C]
  A* y = nullptr;         // [N, C]
  S* mean = nullptr;      // [N] (saved by the forward)
  S* rstd = nullptr;      // [N]
  const A* dy = nullptr;  // [N, C]
  A* dx = nullptr;        // [N, C] +=
  S* dw = nullptr;        // [C] += (ignored when w is null)
  S* db = nullptr;        // [C] +=
  int64_t N = 0, C = 0;
  double eps = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void layernorm_forward(const LayerNormParams<T>& p);
// Inverts layernorm_forward.
template <class T>
void layernorm_backward(const LayerNormParams<T>& p);

}  // namespace ms::cpu
