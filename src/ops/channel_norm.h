// The video VAE's RMS norm over the channels of a channels-first frame (Wan's RMS_norm: F.normalize over dim 1, not
// mean(x^2) + eps), optionally followed by SiLU, forward only (the VAE is frozen):
//   y[c, p] = act(x[c, p] / max(||x[:, p]||_2, 1e-12) * sqrt(C) * gamma[c]),  act = SiLU or identity.
#pragma once
#include <cstdint>

namespace ms {

template <class T>
struct ChannelNormParams {
  const T* x = nullptr;      // [C, N] (N pixels per channel plane)
  const T* gamma = nullptr;  // [C]
  T* y = nullptr;            // [C, N] (may be x)
  int64_t C = 0, N = 0;
  bool silu = false;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void channel_rms_norm_forward(const ChannelNormParams<T>& p);

}  // namespace ms::cpu
