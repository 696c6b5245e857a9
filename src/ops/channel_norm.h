// The video VAE's RMS norm over the channels of a channels-first frame (Wan's RMS_norm: F.normalize over dim 1, not
// mean(x^2) + eps), optionally followed by SiLU, forward only (the VAE is frozen):
//   y[c, p] = act(x[c, p] / max(||x[:, p]||_2, 1e-12) * sqrt(C) * gamma[c]),  act = SiLU or identity.
#pragma once
#include <cstdint>

namespace ms::cpu {

// x [C, N] (N pixels per channel plane), gamma [C] -> y [C, N] (may be x).
template <class T>
void channel_rms_norm_forward(const T* x, const T* gamma, T* y, int64_t C, int64_t N, bool silu);

}  // namespace ms::cpu
