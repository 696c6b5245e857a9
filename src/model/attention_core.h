// The self-attention core for every attention type (docs/attention.md), written once over an ops policy
// (backend/cpu/cpu_ops.h, backend/cuda/cuda_ops.h): the model's blocks (model/block_impl.h), `megaslide op` and
// `megaslide bench attention` all run it.
#pragma once
#include <array>
#include <cstdint>

#include "model/config.h"
#include "ops/attention.h"
#include "ops/dsa.h"

namespace ms {

// What the core of one layer computes: the type, the token grid and heads, and the type's parameters.
struct AttentionSpec {
  AttentionType type = AttentionType::dense;
  VideoAttentionDims dims{};        // B, T, H, W, nh, d
  std::array<int64_t, 3> window{};  // window, dsa, dsa_fixed: kt, kh, kw
  bool shifted = false;             // window: this layer's windows are shifted
  int64_t groups = 0;               // dsa: offset groups G
};

// q, k, v [B, T, H, W, nh, d] (RoPE applied), offsets [B, T, H, W, G, P, 3] (dsa; ignored otherwise)
// -> out [B, T, H, W, nh, d], lse [B, nh, L].
template <class Ops, class A, class S>
void attention_forward(Ops& ops, const AttentionSpec& s, const A* q, const A* k, const A* v, const A* offsets, A* out,
                       S* lse) {
  const VideoAttentionDims& d = s.dims;
  switch (s.type) {
    case AttentionType::dense:
      ops.attention_forward(q, k, v, out, lse, AttentionDims{d.B, d.L(), d.L(), d.nh, d.d});
      return;
    case AttentionType::window:
      ops.window_attention_forward(q, k, v, out, lse, d, s.window, s.shifted);
      return;
    case AttentionType::dsa:
    case AttentionType::dsa_fixed:
      ops.dsa_forward(q, k, v, s.type == AttentionType::dsa ? offsets : nullptr, out, lse, d,
                      DsaArgs{s.window, s.groups});
      return;
  }
}

// Inverts attention_forward from its saved out and lse given dout: dq, dk, dv += and, for dsa, doffsets += (skipped
// when null).
template <class Ops, class A, class S>
void attention_backward(Ops& ops, const AttentionSpec& s, const A* q, const A* k, const A* v, const A* offsets,
                        const A* out, const S* lse, const A* dout, A* dq, A* dk, A* dv, A* doffsets) {
  const VideoAttentionDims& d = s.dims;
  switch (s.type) {
    case AttentionType::dense:
      ops.attention_backward(q, k, v, out, lse, dout, dq, dk, dv, AttentionDims{d.B, d.L(), d.L(), d.nh, d.d});
      return;
    case AttentionType::window:
      ops.window_attention_backward(q, k, v, out, lse, dout, dq, dk, dv, d, s.window, s.shifted);
      return;
    case AttentionType::dsa:
    case AttentionType::dsa_fixed: {
      const bool off = s.type == AttentionType::dsa;
      ops.dsa_backward(q, k, v, off ? offsets : nullptr, out, lse, dout, dq, dk, dv, off ? doffsets : nullptr, d,
                       DsaArgs{s.window, s.groups});
      return;
    }
  }
}

}  // namespace ms
