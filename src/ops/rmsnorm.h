// RMSNorm over the last dim (Wan's WanRMSNorm): y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps).
#pragma once
#include <cstdint>

namespace ms {

// X = the input's element type, S = the statistics' and weight gradient's, W = the weight's, Y = the output's (T on
// the CPU; bf16 in and out with fp32 statistics for the DiT on the GPU, fp32 in for umT5's residual stream). The
// forward reads x, w and writes y, rstd; the backward reads x, w, rstd, dy and accumulates into dx, dw.
template <class X, class S = X, class W = X, class Y = X>
struct RmsNormParams {
  const X* x = nullptr;   // [N, C]
  const W* w = nullptr;   // [C]
  Y* y = nullptr;         // [N, C]
  S* rstd = nullptr;      // [N] (saved by the forward)
  const Y* dy = nullptr;  // [N, C]
  X* dx = nullptr;        // [N, C] +=
  S* dw = nullptr;        // [C] +=
  int64_t N = 0, C = 0;
  double eps = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void rmsnorm_forward(const RmsNormParams<T>& p);
// Inverts rmsnorm_forward.
template <class T>
void rmsnorm_backward(const RmsNormParams<T>& p);

}  // namespace ms::cpu
