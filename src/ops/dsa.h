// 3D deformable slide attention (docs/attention.md): every query attends to P = kt*kh*kw trilinear samples of the
// (RoPE-rotated) keys and of the values, taken around a window that slides inward at the video borders and
// shifted by learned offsets. dsa_fixed is the same kernel with offsets = 0 (neighbourhood attention).
//
// Query i = (t, h, w), head n, group g = n / (nh / G). Per axis with extent E and window k: k' = min(k, E),
// start s = clamp(i - k'/2, 0, E - k'). Slot p = (jt, jh, jw), j in [0, k), p = (jt*kh + jh)*kw + jw, is valid
// when j < k' on every axis; invalid slots are left out of the softmax. Sample position per axis:
// pos = clamp(s + j + offsets[b, i, g, p, axis], 0, E - 1); corners floor(pos) and min(floor(pos) + 1, E - 1).
// A coordinate with s + j + offset <= 0 or >= E - 1 counts as clamped (the borders themselves included, as in
// torch's grid_sample with padding "border"): its position gradient is zero.
//
// Fused: no sampled keys or values are materialised. The forward scores each sample against the key interpolated from
// its corners and sums the output from the corner rows v[corner]; extra memory is O(P) per query. The backward works
// on each query's distinct corner tokens (a token several samples share is read and updated once per head) and adds
// a scratch for one pass of queries: 4 MiB, or 16 queries' worth per thread if that is more, plus per task a table
// over the box a query's corners span (5 x 7 rows of 64 places for window 3 and offsets within [1, 2, 2]).
#pragma once
#include <array>
#include <cstdint>

#include "ops/attention.h"

namespace ms {

struct DsaArgs {
  std::array<int64_t, 3> window;  // kt, kh, kw (> 0); P = kt*kh*kw
  int64_t groups;                 // G offset groups, dividing nh
  int64_t P() const { return window[0] * window[1] * window[2]; }
};

// q, k, v, out, dout and the gradients [B, T, H, W, nh, d]; lse [B, nh, L].
template <class A, class S = A>
struct DsaParams {
  AttentionTensors<A, S> t;
  const A* offsets = nullptr;  // [B, T, H, W, G, P, 3] in token units (t, h, w order); null: offsets = 0 (dsa_fixed)
  A* doffsets = nullptr;       // backward: shape of offsets, +=; null: no position gradients
  VideoAttentionDims dims{};
  DsaArgs args{};
};

// DSA's offset squashing: offsets[n, i, axis] = range[axis] * tanh(raw[n, i, axis]).
template <class A>
struct DsaOffsetsParams {
  const A* raw = nullptr;       // [N, M, 3] (M = G*P): the offset projection's output
  A* offsets = nullptr;         // [N, M, 3] in token units
  const A* doffsets = nullptr;  // backward: [N, M, 3]
  A* draw = nullptr;            // backward: [N, M, 3], overwritten (may alias doffsets, like rope_backward)
  std::array<double, 3> range{};
  int64_t N = 0, M = 0;
};

}  // namespace ms

namespace ms::cpu {

// out [B, T, H, W, nh, d] and lse [B, nh, L] (the log-sum-exp of the scaled scores, saved for the backward).
template <class T>
void dsa_forward(const DsaParams<T>& p);

// Inverts dsa_forward from its saved out and lse: dq, dk, dv += and doffsets += (when not null).
// Deterministic and independent of the thread count: dq and the position gradients are owned by their query (the
// heads of a group are summed into doffsets in head order); dk, dv rows are owned by one task per (sample, grid rows
// t * H + h of one residue mod the task count) and updated in query order.
template <class T>
void dsa_backward(const DsaParams<T>& p);

template <class T>
void dsa_offsets_forward(const DsaOffsetsParams<T>& p);

// Inverts dsa_offsets_forward: draw = doffsets * range * (1 - tanh(raw)^2).
template <class T>
void dsa_offsets_backward(const DsaOffsetsParams<T>& p);

}  // namespace ms::cpu
