// Dense multi-head attention, flash-style (streaming softmax over key tiles): never holds more than a
// query-tile x key-tile block of scores. Used for dense self-attention and for cross-attention.
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

}  // namespace ms

namespace ms::cpu {

// q [B, Lq, nh, d], k, v [B, Lk, nh, d] -> out [B, Lq, nh, d] = softmax(q k^T / sqrt(d)) v per head;
// lse [B, nh, Lq] = log-sum-exp of the scaled scores, saved for the backward.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& a);

// Inverts attention_forward from its saved out and lse. dq, dk, dv (shapes of q, k, v) +=.
// Parallel over (batch, head), so every gradient element is written by one thread: deterministic.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk,
                        T* dv, const AttentionDims& a);

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
