// Linear layer: y = x W^T + b (torch.nn.Linear).
//
// Like every op of src/ops, its arguments are one params struct, filled where the model calls it and taken whole by
// each backend's kernel. X = the inputs' and outputs' element type, W = the weights', G = the weight gradients' (T on
// the CPU; bf16, bf16, fp32 on the GPU, or fp32 inputs for the time path).
#pragma once
#include <cstdint>

namespace ms {

// The forward reads x, w, b and writes y; the backward reads x, w, dy and accumulates into dx, dw, db.
template <class X, class W = X, class G = X>
struct LinearParams {
  const X* x = nullptr;   // [N, in]
  const W* w = nullptr;   // [out, in]
  const W* b = nullptr;   // [out] or null
  X* y = nullptr;         // [N, out] (overwritten)
  const X* dy = nullptr;  // [N, out]
  X* dx = nullptr;        // [N, in] += dy W (skipped when null)
  G* dw = nullptr;        // [out, in] += dy^T x
  G* db = nullptr;        // [out] += sum_n dy (skipped when null)
  int64_t N = 0, in = 0, out = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void linear_forward(const LinearParams<T>& p);
// Inverts linear_forward.
template <class T>
void linear_backward(const LinearParams<T>& p);

}  // namespace ms::cpu
