// Dense multi-head attention, flash-style (streaming softmax over key tiles): never holds more than a
// query-tile x key-tile block of scores. Used for dense self-attention and for cross-attention.
#pragma once
#include <cstdint>

namespace ms::cpu {

struct AttentionDims {
  int64_t B;       // batch
  int64_t Lq, Lk;  // query / key tokens
  int64_t nh, d;   // heads, head dim
};

// q [B, Lq, nh, d], k, v [B, Lk, nh, d] -> out [B, Lq, nh, d] = softmax(q k^T / sqrt(d)) v per head;
// lse [B, nh, Lq] = log-sum-exp of the scaled scores, saved for the backward.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& a);

// Inverts attention_forward from its saved out and lse. dq, dk, dv (shapes of q, k, v) +=.
// Parallel over (batch, head), so every gradient element is written by one thread: deterministic.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk,
                        T* dv, const AttentionDims& a);

}  // namespace ms::cpu
