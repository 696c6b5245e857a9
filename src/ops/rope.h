// Wan's 3D rotary position embedding on self-attention q and k.
// Head dim d (even) is split into complex pairs (x[2i], x[2i+1]); c = d/2 pairs are split
// c - 2*(c/3) for frames, c/3 for height, c/3 for width (docs/model.md). Pair i of an axis part with
// n pairs rotates by pos * 10000^(-2i/(2n)), pos the token's index on that axis; theta = 10000.
#pragma once
#include <cstdint>

namespace ms {

// The forward rotates x into y (y may alias x); the backward rotates dy back into dx (overwritten; may alias dy).
template <class A>
struct RopeParams {
  const A* x = nullptr;   // [B, F, H, W, nh, d]
  A* y = nullptr;         // [B, F, H, W, nh, d]
  const A* dy = nullptr;  // [B, F, H, W, nh, d]
  A* dx = nullptr;        // [B, F, H, W, nh, d]
  int64_t B = 0, F = 0, H = 0, W = 0, nh = 0, d = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void rope_forward(const RopeParams<T>& p);
// Inverts rope_forward (rotation by the negative angle): dx = R^T dy.
template <class T>
void rope_backward(const RopeParams<T>& p);

}  // namespace ms::cpu
