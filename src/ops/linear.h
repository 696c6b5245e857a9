// Linear layer: y = x W^T + b (torch.nn.Linear).
#pragma once
#include <cstdint>

namespace ms::cpu {

// x [N, in], w [out, in], b [out] or null -> y [N, out] (overwritten).
template <class T>
void linear_forward(const T* x, const T* w, const T* b, T* y, int64_t N, int64_t in, int64_t out);

// Inverts linear_forward. Accumulates: dx [N, in] += dy W (skipped when dx is null),
// dw [out, in] += dy^T x, db [out] += sum_n dy (skipped when db is null).
template <class T>
void linear_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t N, int64_t in, int64_t out);

}  // namespace ms::cpu
