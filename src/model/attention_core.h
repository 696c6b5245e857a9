// The self-attention core for every attention type (docs/attention.md), written once over an ops policy
// (backend/cpu/cpu_ops.h, backend/cuda/cuda_ops.h): the model's blocks (model/block_impl.h), `megaslide op` and
// `megaslide bench attention` all run it.
#pragma once
#include <array>
#include <cstdint>

#include "model/config.h"
#include "ops/attention.h"
#include "ops/dsa.h"
#include "ops/window_attention.h"

namespace ms {

// What the core of one layer computes: the type, the token grid and heads, and the type's parameters.
struct AttentionSpec {
  AttentionType type = AttentionType::dense;
  VideoAttentionDims dims{};        // B, T, H, W, nh, d
  std::array<int64_t, 3> window{};  // window, dsa, dsa_fixed: kt, kh, kw
  bool shifted = false;             // window: this layer's windows are shifted
  int64_t groups = 0;               // dsa: offset groups G
};

// Each type's params (ops/attention.h, ops/window_attention.h, ops/dsa.h) filled once from the spec and the
// tensors, and handed to the policy's forward or backward: q, k, v, out, dout, dq, dk, dv [B, T, H, W, nh, d] (RoPE
// applied), lse [B, nh, L]; offsets, doffsets [B, T, H, W, G, P, 3] for dsa (ignored otherwise; doffsets null: no
// position gradients).
template <bool kBackward, class Ops, class A, class S>
void run_attention(Ops& ops, const AttentionSpec& s, const AttentionTensors<A, S>& t, const A* offsets, A* doffsets) {
  const VideoAttentionDims& d = s.dims;
  switch (s.type) {
    case AttentionType::dense: {
      const AttentionParams<A, S> p{t, {d.B, d.L(), d.L(), d.nh, d.d}};
      if constexpr (kBackward)
        ops.attention_backward(p);
      else
        ops.attention_forward(p);
      return;
    }
    case AttentionType::window: {
      const WindowAttentionParams<A, S> p{t, d, s.window, s.shifted};
      if constexpr (kBackward)
        ops.window_attention_backward(p);
      else
        ops.window_attention_forward(p);
      return;
    }
    case AttentionType::dsa:
    case AttentionType::dsa_fixed: {
      const bool off = s.type == AttentionType::dsa;
      const DsaParams<A, S> p{t, off ? offsets : nullptr, off ? doffsets : nullptr, d, DsaArgs{s.window, s.groups}};
      if constexpr (kBackward)
        ops.dsa_backward(p);
      else
        ops.dsa_forward(p);
      return;
    }
  }
}

// The policy's tensors: activations Ops::Act, statistics Ops::Stat.
template <class Ops>
using OpsTensors = AttentionTensors<typename Ops::Act, typename Ops::Stat>;

// out, lse from q, k, v (and offsets).
template <class Ops, class A = typename Ops::Act>
void attention_forward(Ops& ops, const AttentionSpec& s, const OpsTensors<Ops>& t, const A* offsets) {
  run_attention<false>(ops, s, t, offsets, static_cast<A*>(nullptr));
}

// Inverts attention_forward from its saved out and lse given dout: dq, dk, dv += and, for dsa, doffsets +=.
template <class Ops, class A = typename Ops::Act>
void attention_backward(Ops& ops, const AttentionSpec& s, const OpsTensors<Ops>& t, const A* offsets, A* doffsets) {
  run_attention<true>(ops, s, t, offsets, doffsets);
}

}  // namespace ms
