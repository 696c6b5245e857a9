// Dense multi-head attention, flash-style (streaming softmax over key tiles): never holds more than a
// query-tile x key-tile block of scores. Used for dense self-attention and for cross-attention.
//
// Like every op of src/ops, each attention op (this one, ops/window_attention.h, ops/dsa.h) takes one params struct,
// filled once where the model calls it and taken whole by each backend's launcher: its AttentionTensors and the op's
// own shape and settings. A = the activations' element type, S = the statistics' (lse): T on the CPU, bf16 and fp32
// on the GPU.
#pragma once
#include <cstdint>

namespace ms {

struct AttentionDims {
  int64_t B;       // batch
  int64_t Lq, Lk;  // query / key tokens
  int64_t nh, d;   // heads, head dim
};

// Self-attention over a video token grid (docs/model.md's layout: tokens (t, h, w), w fastest): the dims shared
// by the local attention ops (window, dsa).
struct VideoAttentionDims {
  int64_t B;        // batch
  int64_t T, H, W;  // token grid extents
  int64_t nh, d;    // heads, head dim
  int64_t L() const { return T * H * W; }
};

// The tensors of one attention call. The forward reads q, k, v and writes out and lse; the backward reads q, k, v,
// out, lse and dout and accumulates into dq, dk, dv (+=; the model zeroes them first). The gradients are null in a
// forward.
template <class A, class S = A>
struct AttentionTensors {
  const A* q = nullptr;     // [B, Lq, nh, d]
  const A* k = nullptr;     // [B, Lk, nh, d]
  const A* v = nullptr;     // [B, Lk, nh, d]
  A* out = nullptr;         // [B, Lq, nh, d]
  S* lse = nullptr;         // [B, nh, Lq] log-sum-exp of the scaled scores
  const A* dout = nullptr;  // [B, Lq, nh, d]
  A* dq = nullptr;          // shape of q
  A* dk = nullptr;          // shape of k
  A* dv = nullptr;          // shape of v
};

// Dense attention: every query of a sample attends to every key of it (self- and cross-attention).
template <class A, class S = A>
struct AttentionParams {
  AttentionTensors<A, S> t;
  AttentionDims dims{};
};

}  // namespace ms

namespace ms::cpu {

// out = softmax(q k^T / sqrt(d)) v per head; lse saved for the backward.
template <class T>
void attention_forward(const AttentionParams<T>& p);

// Inverts attention_forward from its saved out and lse: dq, dk, dv +=. Parallel over (batch, head), so every
// gradient element is written by one thread: deterministic.
template <class T>
void attention_backward(const AttentionParams<T>& p);

// The serial kernels behind the two above, for one head of one sample, for callers that parallelise over
// their own tasks (window attention runs one per window). Rows of q, out, dout, dq [Lq, d] and of k, v,
// dk, dv [Lk, d] are `ld` elements apart; lse [Lq] is contiguous. Same results as the batched calls.
template <class T>
void attention_forward_head(const T* q, const T* k, const T* v, T* out, T* lse, int64_t Lq, int64_t Lk, int64_t d,
                            int64_t ld);
template <class T>
void attention_backward_head(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq,
                             T* dk, T* dv, int64_t Lq, int64_t Lk, int64_t d, int64_t ld);

}  // namespace ms::cpu
