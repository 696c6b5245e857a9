// Mean squared error: loss = mean((pred - target)^2), computed in float64.
#pragma once
#include <cstdint>

namespace ms::cpu {

// Returns the loss; writes dpred [n] = 2 (pred - target) / n * scale when dpred is non-null.
template <class T>
double mse_loss(const T* pred, const T* target, T* dpred, int64_t n, double scale = 1.0);

}  // namespace ms::cpu
