// Mean squared error: loss = mean((pred - target)^2), computed in float64; optionally over part of each run of
// elements (TI2V's image-to-video steps leave each clip's clean first latent frame out, as DiffSynth-Studio does).
#pragma once
#include <cstdint>

namespace ms {

template <class T>
struct MseLossParams {
  const T* pred = nullptr;    // [n]
  const T* target = nullptr;  // [n]
  T* dpred = nullptr;         // [n] = 2 (pred - target) / kept() * scale, written when not null (0 where left out)
  int64_t n = 0;
  double scale = 1.0;
  // Of each run of `period` elements (0: one run of n), the first `skip` are left out of the mean.
  int64_t period = 0, skip = 0;

  bool left_out(int64_t i) const { return skip > 0 && i % period < skip; }
  int64_t kept() const { return skip > 0 ? n / period * (period - skip) : n; }
};

}  // namespace ms

namespace ms::cpu {

// Returns the loss.
template <class T>
double mse_loss(const MseLossParams<T>& p);

}  // namespace ms::cpu
