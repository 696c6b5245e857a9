// The tensor-core tile of the attention kernels (flash_attention.cu, dsa.cu): 64 rows in 4 warps of 16, their
// operands staged in shared memory as [64, Dp + kPad] bf16 rows, products by mma.sync m16n8k16 with ldmatrix operands
// (ptx.cuh). Loops over channels run to the largest head dim, unrolled and cut at Dp, so that the fragments stay in
// registers.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>

#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/ptx.cuh"

namespace ms::cuda::tile {

using bf16 = __nv_bfloat16;

constexpr int kRows = 64;  // rows per tile
constexpr int kWarps = 4;  // warp w owns rows 16 w .. 16 w + 15 of the block's own tile
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxDp = 128;  // the largest padded head dim
constexpr int kPad = 8;  // bf16 added to each staged row: 16 bytes, so that ldmatrix's eight rows hit distinct banks

// Shared memory handed out in 128-byte aligned pieces, in order. Carving from address 0 counts the bytes a launch
// needs, so the host's size and the kernel's layout come from the same code.
struct Carve {
  uintptr_t at;
  template <class T>
  __host__ __device__ T* take(int64_t n) {
    T* p = reinterpret_cast<T*>(at);
    at += (uintptr_t(n) * sizeof(T) + 127) / 128 * 128;
    return p;
  }
};

// The calling thread's place: warp w owns rows 16 w .. 16 w + 15 of the block's own tile; lane 4 g + t holds rows g
// and g + 8 of them and, of each 8-wide column tile of an mma result, columns 2 t and 2 t + 1 (ptx.cuh).
struct Lane {
  int w, lane, g, t;
};
__device__ inline Lane lane_of() {
  const int w = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  return {w, lane, lane / 4, lane % 4};
}

// Whether rows of these tensors, d channels each, can be staged by cp.async: whole 16-byte pieces, aligned.
template <class... P>
__device__ bool stageable(int64_t d, const P*... p) {
  return d % 8 == 0 && ((uintptr_t(p) | ...) & 15) == 0;
}

// tile [kRows, Dp + kPad] = rows 0 .. kRows - 1 of x, row r starting at element row_of(r) (< 0: a row of zeros),
// zeros past d: by cp.async where `async` (the caller commits and waits), else element by element.
template <class RowOf>
__device__ void stage_rows(bf16* tile, const uint16_t* x, int64_t d, int Dp, bool async, RowOf row_of) {
  const int ld = Dp + kPad;
  if (async) {
    const int pieces = Dp / 8;
    for (int e = threadIdx.x; e < kRows * pieces; e += blockDim.x) {
      const int r = e / pieces, c = e % pieces * 8;
      const int64_t at = row_of(r);
      const bool in = at >= 0 && c < d;
      ptx::cp_async16(tile + r * ld + c, in ? x + at + c : x, in ? 16 : 0);
    }
    return;
  }
  const bf16* src = reinterpret_cast<const bf16*>(x);
  for (int e = threadIdx.x; e < kRows * Dp; e += blockDim.x) {
    const int r = e / Dp, c = e % Dp;
    const int64_t at = c < d ? row_of(r) : -1;
    tile[r * ld + c] = at >= 0 ? src[at + c] : __float2bfloat16(0.f);
  }
}

// Closes the stage of cp.async just issued (empty past the last tile) and waits, block-wide, for the one before it:
// so that the tile a double-buffered loop is at is in shared memory while the next one loads.
__device__ inline void previous_stage_ready() {
  ptx::cp_async_commit();
  ptx::cp_async_wait<1>();
  __syncthreads();
}

// acc (this warp's 16 rows of `a` by the 64 rows of `b`, 8 columns a fragment) = a b^T over Dp channels; a and b
// [kRows, Dp + kPad] in shared memory.
__device__ inline void scores(float (&acc)[kRows / 8][4], const bf16* a, const bf16* b, int Dp, const Lane& L) {
  const int ld = Dp + kPad;
#pragma unroll
  for (int n = 0; n < kRows / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.f;
#pragma unroll
  for (int kc = 0; kc < kMaxDp / 16; ++kc) {
    if (kc >= Dp / 16) break;
    uint32_t af[4];  // rows 0-7 | 8-15 by channels 0-7 | 8-15 of the chunk
    ptx::ldmatrix<4>(af, a + (16 * L.w + L.lane % 16) * ld + 16 * kc + 8 * (L.lane / 16));
#pragma unroll
    for (int n = 0; n < kRows / 8; n += 2) {
      uint32_t bf[2][2];  // b's rows 8 n .. 8 n + 15 by the chunk's channels: two B fragments
      ptx::ldmatrix<4>(reinterpret_cast<uint32_t(&)[4]>(bf),
                       b + (8 * n + 8 * (L.lane / 16) + L.lane % 8) * ld + 16 * kc + 8 * (L.lane / 8 % 2));
      ptx::mma_bf16_16816(acc[n], af, bf[0], acc[n]);
      ptx::mma_bf16_16816(acc[n + 1], af, bf[1], acc[n + 1]);
    }
  }
}

// An mma result over 64 columns, rounded to bf16, as the A fragments of a product over those columns (16 each).
__device__ inline void a_fragments(uint32_t (&f)[kRows / 16][4], const float (&x)[kRows / 8][4]) {
#pragma unroll
  for (int n = 0; n < kRows / 8; ++n) {
    f[n / 2][2 * (n % 2)] = ptx::pack_bf16(__float2bfloat16(x[n][0]), __float2bfloat16(x[n][1]));
    f[n / 2][2 * (n % 2) + 1] = ptx::pack_bf16(__float2bfloat16(x[n][2]), __float2bfloat16(x[n][3]));
  }
}

// acc (this warp's 16 rows by Dp channels) += p (16 x 64, A fragments) times b, 64 rows by Dp channels in shared memory
// ([kRows, Dp + kPad]): its B fragments by ldmatrix .trans.
__device__ inline void accumulate(float (&acc)[kMaxDp / 8][4], const uint32_t (&p)[kRows / 16][4], const bf16* b,
                                  int Dp, const Lane& L) {
  const int ld = Dp + kPad;
#pragma unroll
  for (int c = 0; c < kRows / 16; ++c)
#pragma unroll
    for (int n = 0; n < kMaxDp / 8; n += 2) {
      if (n >= Dp / 8) break;
      uint32_t bf[2][2];  // b's rows 16 c .. 16 c + 15 by channels 8 n .. 8 n + 15, transposed: two B fragments
      ptx::ldmatrix_trans<4>(reinterpret_cast<uint32_t(&)[4]>(bf),
                             b + (16 * c + 8 * (L.lane / 8 % 2) + L.lane % 8) * ld + 8 * n + 8 * (L.lane / 16));
      ptx::mma_bf16_16816(acc[n], p[c], bf[0], acc[n]);
      ptx::mma_bf16_16816(acc[n + 1], p[c], bf[1], acc[n + 1]);
    }
}

// This warp's rows of a [.., d] tensor, row i (0 .. kRows - 1 of the tile) starting at element row_of(i) (< 0: not
// written): channel c < d gets factor[0 or 1, for rows g and g + 8] times acc, added to its value where `add`.
template <class RowOf>
__device__ void write_rows(uint16_t* x, const float (&acc)[kMaxDp / 8][4], const float (&factor)[2], bool add,
                           int64_t d, const Lane& ln, RowOf row_of) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t at = row_of(16 * ln.w + ln.g + 8 * r);
    if (at < 0) continue;
    uint16_t* row = x + at;
#pragma unroll
    for (int n = 0; n < kMaxDp / 8; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = 8 * n + 2 * ln.t + e;
        if (c >= d) continue;
        const float v = factor[r] * acc[n][2 * r + e];
        store(row, c, add ? load(row, c) + v : v);
      }
  }
}

}  // namespace ms::cuda::tile
