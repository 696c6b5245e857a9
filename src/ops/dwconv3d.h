// Depthwise 3D convolution, 3x3x3 taps, stride 1, zero padding 1 (torch Conv3d(C, C, 3, padding=1, groups=C)),
// on channels-last video tokens: the DSA offset network's first layer.
#pragma once
#include <cstdint>

namespace ms::cpu {

// x [B, T, H, W, C], w [C, 1, 3, 3, 3] (= [C, 27], taps t-major), b [C] or null -> y [B, T, H, W, C] (overwritten).
template <class T>
void dwconv3d_forward(const T* x, const T* w, const T* b, T* y, int64_t B, int64_t Tn, int64_t H, int64_t W, int64_t C);

// Inverts dwconv3d_forward given dy [B, T, H, W, C]: dx += (skipped when null), dw [C, 27] +=, db [C] += (skipped
// when null). dx is gathered per token; dw and db are reduced per channel block: deterministic.
template <class T>
void dwconv3d_backward(const T* x, const T* w, const T* dy, T* dx, T* dw, T* db, int64_t B, int64_t Tn, int64_t H,
                       int64_t W, int64_t C);

}  // namespace ms::cpu
