// LayerNorm over the last dim: y = (x - mean) * rstd [* w + b], rstd = 1/sqrt(var + eps) (biased var).
#pragma once
#include <cstdint>

namespace ms::cpu {

// x [N, C] -> y [N, C]; saves mean [N] and rstd [N]. w, b [C] may both be null (no affine).
template <class T>
void layernorm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t N, int64_t C, double eps);

// Inverts layernorm_forward. dx [N, C] += ...; dw, db [C] += ... (ignored when w, b are null).
template <class T>
void layernorm_backward(const T* x, const T* w, const T* mean, const T* rstd, const T* dy, T* dx, T* dw, T* db,
                        int64_t N, int64_t C);

}  // namespace ms::cpu
