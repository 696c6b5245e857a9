// Mean squared error: loss = mean((pred - target)^2), computed in float64.
#pragma once
#include <cstdint>

namespace ms {

template <class T>
struct MseLossParams {
  const T* pred = nullptr;    // [n]
  const T* target = nullptr;  // [n]
  T* dpred = nullptr;         // [n] = 2 (pred - target) / n * scale, written when not null
  int64_t n = 0;
  double scale = 1.0;
};

}  // namespace ms

namespace ms::cpu {

// Returns the loss.
template <class T>
double mse_loss(const MseLossParams<T>& p);

}  // namespace ms::cpu
