// Flash-style attention on tensor cores (backend/cuda/flash_attention.cu), behind cuda::attention_forward and
// attention_backward (ops/attention.h) for head dims up to kFlashMaxHeadDim, in FlashAttention-2's structure: tiles of
// 64 queries by 64 keys, 4 warps of 16 rows; mma.sync m16n8k16 (bf16 in, fp32 accumulate) with operands by ldmatrix
// from shared memory, the next tiles loaded by cp.async while the current one is used (ptx.cuh); scores,
// probabilities and accumulators in registers (O(L) memory), the softmax online, lse saved for the backward; the
// probabilities and their gradients rounded to bf16 before their products, as in FlashAttention-2. The backward is two
// kernels without atomics, so it is deterministic: one per key tile (dk, dv), one per query tile (dq), each recomputing
// the tile's scores. The same kernels run window attention (ops/window_attention.h): a group of rows is then one Swin
// cell of the token grid instead of a whole sample.
#pragma once
#include <array>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"

namespace ms::cuda {

constexpr int64_t kFlashMaxHeadDim = 128;

// Which queries attend to which keys: per sample, groups of query rows attending to groups of key rows. Dense: one
// group, every query to every key. Window: each cell of the token grid (the CPU's cells: per axis, cell m covers
// [o + m k, o + (m + 1) k) clipped to [0, E)) attends to itself.
struct FlashRows {
  AttentionDims a;                          // q [B, Lq, nh, d], k, v [B, Lk, nh, d]
  int64_t groups = 1;                       // per sample
  int64_t max_q = 0, max_k = 0;             // the most query / key rows of a group
  int64_t ext[3] = {0, 0, 0};               // window: the token grid T, H, W (ext[0] == 0: dense)
  int64_t k[3] = {}, o[3] = {}, n[3] = {};  // window, per axis: cell size, first cell's start, cells
};
FlashRows dense_rows(const AttentionDims& a);
FlashRows window_rows(const VideoAttentionDims& d, const std::array<int64_t, 3>& window, bool shifted);

// q, k, v bf16 -> out bf16 (shapes of q), lse [B, nh, Lq] fp32, over rows' groups (t's shapes are rows.a's).
void flash_attention_forward(const AttentionTensors<uint16_t, float>& t, const FlashRows& rows, Stream stream);
// dq, dk, dv += the gradients, from lse and delta [B, nh, Lq] = rowsum(dout * out) (fp32, attention_delta).
void flash_attention_backward(const AttentionTensors<uint16_t, float>& t, const float* delta, const FlashRows& rows,
                              Stream stream);

// delta [B, nh, Lq] = rowsum(dout * out) per query row and head (backend/cuda/attention.cu).
void attention_delta(const uint16_t* out, const uint16_t* dout, float* delta, const AttentionDims& a, Stream stream);

}  // namespace ms::cuda
