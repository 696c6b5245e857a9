// RMSNorm over the last dim (Wan's WanRMSNorm): y = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps).
#pragma once
#include <cstdint>

namespace ms::cpu {

// x [N, C], w [C] -> y [N, C]; saves rstd [N].
template <class T>
void rmsnorm_forward(const T* x, const T* w, T* y, T* rstd, int64_t N, int64_t C, double eps);

// Inverts rmsnorm_forward. dx [N, C] += ...; dw [C] += ....
template <class T>
void rmsnorm_backward(const T* x, const T* w, const T* rstd, const T* dy, T* dx, T* dw, int64_t N, int64_t C);

}  // namespace ms::cpu
