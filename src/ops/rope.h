// Wan's 3D rotary position embedding on self-attention q and k.
// Head dim d (even) is split into complex pairs (x[2i], x[2i+1]); c = d/2 pairs are split
// c - 2*(c/3) for frames, c/3 for height, c/3 for width (docs/model.md). Pair i of an axis part with
// n pairs rotates by pos * 10000^(-2i/(2n)), pos the token's index on that axis; theta = 10000.
#pragma once
#include <cstdint>

namespace ms::cpu {

// x, y [B, F, H, W, nh, d] (y may alias x).
template <class T>
void rope_forward(const T* x, T* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d);

// Inverts rope_forward (rotation by the negative angle): dx = R^T dy, overwritten (dx may alias dy).
template <class T>
void rope_backward(const T* dy, T* dx, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d);

}  // namespace ms::cpu
