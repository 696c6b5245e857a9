#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/flash_attention.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mma_tile.cuh"
#include "backend/cuda/ptx.cuh"

namespace ms::cuda {
namespace {

using bf16 = __nv_bfloat16;

using tile::a_fragments;
using tile::accumulate;
using tile::Carve;
using tile::Lane;
using tile::lane_of;
using tile::previous_stage_ready;
using tile::scores;
using tile::stageable;
constexpr int kTile = tile::kRows;  // query and key rows per tile, 16 a warp
constexpr int kFlashThreads = tile::kThreads;
constexpr int kMaxDp = tile::kMaxDp, kPad = tile::kPad;
static_assert(kMaxDp == kFlashMaxHeadDim, "the flash kernels' head dims are the tile's");
constexpr float kLog2e = 1.4426950408889634f;

// One group of rows (FlashRows): its query and key counts and the token of each of its rows.
struct Group {
  int64_t nq, nk;
  int64_t start[3], size[3], H, W;  // a window cell; size[0] == 0: dense, row i is token i
  __device__ int64_t token(int64_t i) const {
    if (size[0] == 0) return i;
    const int64_t t = start[0] + i / (size[1] * size[2]), h = start[1] + i / size[2] % size[1];
    return (t * H + h) * W + start[2] + i % size[2];
  }
};

__device__ Group group_of(const FlashRows& rows, int64_t g) {
  Group gr{rows.a.Lq, rows.a.Lk, {0, 0, 0}, {0, 0, 0}, rows.ext[1], rows.ext[2]};
  if (rows.ext[0] == 0) return gr;
  const int64_t m[3] = {g / (rows.n[1] * rows.n[2]), g / rows.n[2] % rows.n[1], g % rows.n[2]};
  gr.nq = 1;
  for (int i = 0; i < 3; ++i) {
    const int64_t b0 = max(int64_t(0), rows.o[i] + m[i] * rows.k[i]);
    gr.start[i] = b0;
    gr.size[i] = min(rows.ext[i], rows.o[i] + (m[i] + 1) * rows.k[i]) - b0;
    gr.nq *= gr.size[i];
  }
  gr.nk = gr.nq;
  return gr;
}

// The block's dynamic shared memory, carved by `layout`.
template <class Smem>
__device__ Smem shared_layout(Smem (*layout)(Carve&, int), int Dp) {
  extern __shared__ __align__(128) unsigned char smem[];
  Carve carve{uintptr_t(smem)};
  return layout(carve, Dp);
}

// Where a block works: its sample, group and the first of its 64 rows (of `rows_per_group` tiles of 64).
struct BlockRows {
  int64_t b, h, r0;
  Group g;
};
__device__ BlockRows block_rows(const FlashRows& rows, int64_t rows_per_group) {
  const int64_t tiles = (rows_per_group + kTile - 1) / kTile;
  return {blockIdx.z, blockIdx.y, int64_t(blockIdx.x) % tiles * kTile, group_of(rows, int64_t(blockIdx.x) / tiles)};
}

// Row r0 + r of a group (count rows, tokens by gr) of head h of sample b of a [B, L, nh, d] tensor: where it starts,
// or -1 past the group's rows.
struct GroupRows {
  const Group& gr;
  int64_t b, r0, h, L, nh, d, count;
  __device__ int64_t operator()(int r) const { return r0 + r < count ? ((b * L + gr.token(r0 + r)) * nh + h) * d : -1; }
};

// Group rows r0 .. r0 + kTile of head h of sample b of a [B, L, nh, d] tensor into tile [kTile, Dp + kPad], zeros past
// the group's rows and past d (tile::stage_rows).
__device__ void stage_tile(bf16* tile, const uint16_t* x, int64_t b, int64_t r0, int64_t h, int64_t L, int64_t nh,
                           int64_t d, int Dp, int64_t count, const Group& gr, bool async) {
  tile::stage_rows(tile, x, d, Dp, async, GroupRows{gr, b, r0, h, L, nh, d, count});
}

// The same for two tensors' rows into their tiles: a stage of the pipeline (keys and values, or queries and output
// gradients).
__device__ void stage_pair(bf16* tx, bf16* ty, const uint16_t* x, const uint16_t* y, int64_t b, int64_t r0, int64_t h,
                           int64_t L, int64_t nh, int64_t d, int Dp, int64_t count, const Group& gr, bool async) {
  stage_tile(tx, x, b, r0, h, L, nh, d, Dp, count, gr, async);
  stage_tile(ty, y, b, r0, h, L, nh, d, Dp, count, gr, async);
}

// This warp's rows of the block's tile (group rows r0 ...) of head h, sample b of a [B, L, nh, d] tensor
// (tile::write_rows).
__device__ void write_rows(uint16_t* x, const float (&acc)[kMaxDp / 8][4], const float (&factor)[2], bool add,
                           int64_t b, int64_t r0, int64_t h, int64_t L, int64_t nh, int64_t d, int64_t count,
                           const Group& gr, const Lane& ln) {
  tile::write_rows(x, acc, factor, add, d, ln, GroupRows{gr, b, r0, h, L, nh, d, count});
}

// One query tile's lse (in log2 units) and delta, zeros past the group's queries.
__device__ void stage_stats(float* lse2, float* dl, const float* lse, const float* delta, const AttentionDims& a,
                            int64_t b, int64_t h, int64_t i0, const Group& gr) {
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    const bool valid = i0 + r < gr.nq;
    const int64_t at = (b * a.nh + h) * a.Lq + (valid ? gr.token(i0 + r) : 0);
    lse2[r] = valid ? lse[at] * kLog2e : 0.f;
    dl[r] = valid ? delta[at] : 0.f;
  }
}

// The forward's shared memory: the query tile and two stages of key and value tiles.
struct ForwardSmem {
  bf16 *q, *k[2], *v[2];  // [kTile, Dp + kPad] each
};
__host__ __device__ ForwardSmem forward_smem(Carve& c, int Dp) {
  ForwardSmem m;
  m.q = c.take<bf16>(kTile * (Dp + kPad));
  for (int s = 0; s < 2; ++s) m.k[s] = c.take<bf16>(kTile * (Dp + kPad)), m.v[s] = c.take<bf16>(kTile * (Dp + kPad));
  return m;
}

// Block (group x query tile, h, b): out, lse for its 64 queries, over every key tile of the group, in
// FlashAttention-2's structure: scores, probabilities and the output in registers through mma.sync, the next key and
// value tiles loading by cp.async while this one is used.
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                         FlashRows rows, int Dp, float scale) {
  const ForwardSmem m = shared_layout(forward_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_q);
  const int64_t i0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (i0 >= gr.nq) return;  // the whole block: a tile past a small cell
  const Lane L = lane_of();
  const bool async = stageable(a.d, q, k, v);
  const int64_t tiles = (gr.nk + kTile - 1) / kTile;
  stage_tile(m.q, q, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr, async);
  stage_pair(m.k[0], m.v[0], k, v, b, 0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr, async);
  ptx::cp_async_commit();
  const float scale2 = scale * kLog2e;  // scores in log2 units
  float o[kMaxDp / 8][4] = {};
  float mx[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g, g + 8: running max, this lane's part of the sum
  for (int64_t jt = 0; jt < tiles; ++jt) {
    const int s = int(jt % 2);
    const int64_t j0 = jt * kTile;
    if (jt + 1 < tiles)
      stage_pair(m.k[1 - s], m.v[1 - s], k, v, b, j0 + kTile, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr, async);
    previous_stage_ready();
    float sc[kTile / 8][4];
    scores(sc, m.q, m.k[s], Dp, L);
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        sc[n][e] = j0 + 8 * n + 2 * L.t + e % 2 < gr.nk ? sc[n][e] * scale2 : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], sc[n][e]);
      }
    float alpha[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {  // the row's four lanes agree on its max
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 1));
      tile_max[r] = fmaxf(tile_max[r], __shfl_xor_sync(0xffffffffu, tile_max[r], 2));
      const float mnew = fmaxf(mx[r], tile_max[r]);  // every tile has a valid key: finite
      alpha[r] = exp2f(mx[r] - mnew);
      mx[r] = mnew;
      l[r] *= alpha[r];
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // p rounded to bf16 as the product uses it: the normalisation matches it
        sc[n][e] = __bfloat162float(__float2bfloat16(exp2f(sc[n][e] - mx[e / 2])));
        l[e / 2] += sc[n][e];
      }
#pragma unroll
    for (int n = 0; n < kMaxDp / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= alpha[e / 2];
    uint32_t pf[kTile / 16][4];
    a_fragments(pf, sc);
    accumulate(o, pf, m.v[s], Dp, L);
    __syncthreads();  // every read of stage s done before the next iteration loads tile jt + 2 into it
  }
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = 1.f / l[r];
    const int64_t i = i0 + 16 * L.w + L.g + 8 * r;
    if (L.t == 0 && i < gr.nq) lse[(b * a.nh + h) * a.Lq + gr.token(i)] = (mx[r] + log2f(l[r])) / kLog2e;
  }
  write_rows(out, o, inv, false, b, i0, h, a.Lq, a.nh, a.d, gr.nq, gr, L);
}

// The key-side backward's shared memory: the block's key and value tiles, two stages of query and output-gradient
// tiles with their rows' lse and delta.
struct KeySmem {
  bf16 *k, *v, *q[2], *dout[2];  // [kTile, Dp + kPad] each
  float *lse[2], *delta[2];      // [kTile], lse in log2 units
};
__host__ __device__ KeySmem key_smem(Carve& c, int Dp) {
  KeySmem m;
  m.k = c.take<bf16>(kTile * (Dp + kPad)), m.v = c.take<bf16>(kTile * (Dp + kPad));
  for (int s = 0; s < 2; ++s) {
    m.q[s] = c.take<bf16>(kTile * (Dp + kPad)), m.dout[s] = c.take<bf16>(kTile * (Dp + kPad));
    m.lse[s] = c.take<float>(kTile), m.delta[s] = c.take<float>(kTile);
  }
  return m;
}

// Block (group x key tile, h, b): dk, dv of its 64 keys, over every query tile of the group; warp w's keys by the
// tile's queries: p^T = exp2(k q^T - lse), dv += p^T dout, ds^T = p^T (v dout^T - delta), dk += ds^T q.
__global__ void __launch_bounds__(kFlashThreads)
    flash_dkv_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse, const uint16_t* dout,
                     const float* delta, uint16_t* dk, uint16_t* dv, FlashRows rows, int Dp, float scale) {
  const KeySmem m = shared_layout(key_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_k);
  const int64_t j0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (j0 >= gr.nk) return;  // the whole block: a tile past a small cell
  const Lane L = lane_of();
  const bool async = stageable(a.d, q, k, v, dout);
  const int64_t tiles = (gr.nq + kTile - 1) / kTile;
  stage_pair(m.k, m.v, k, v, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr, async);
  stage_pair(m.q[0], m.dout[0], q, dout, b, 0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr, async);
  stage_stats(m.lse[0], m.delta[0], lse, delta, a, b, h, 0, gr);
  ptx::cp_async_commit();
  const float scale2 = scale * kLog2e;
  float dka[kMaxDp / 8][4] = {}, dva[kMaxDp / 8][4] = {};
  for (int64_t it = 0; it < tiles; ++it) {
    const int s = int(it % 2);
    const int64_t i0 = it * kTile;
    if (it + 1 < tiles) {
      stage_pair(m.q[1 - s], m.dout[1 - s], q, dout, b, i0 + kTile, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr, async);
      stage_stats(m.lse[1 - s], m.delta[1 - s], lse, delta, a, b, h, i0 + kTile, gr);
    }
    previous_stage_ready();
    float pt[kTile / 8][4], dst[kTile / 8][4];
    scores(pt, m.k, m.q[s], Dp, L);  // s^T = k q^T
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * n + 2 * L.t + e % 2;  // the query in the tile
        const bool valid = j0 + 16 * L.w + L.g + 8 * (e / 2) < gr.nk && i0 + c < gr.nq;
        pt[n][e] = valid ? exp2f(pt[n][e] * scale2 - m.lse[s][c]) : 0.f;
      }
    uint32_t f[kTile / 16][4];
    a_fragments(f, pt);
    accumulate(dva, f, m.dout[s], Dp, L);  // dv += p^T dout
    scores(dst, m.v, m.dout[s], Dp, L);    // dp^T = v dout^T
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) dst[n][e] = pt[n][e] * (dst[n][e] - m.delta[s][8 * n + 2 * L.t + e % 2]);
    a_fragments(f, dst);
    accumulate(dka, f, m.q[s], Dp, L);  // dk += ds^T q (scaled below)
    __syncthreads();                    // every read of stage s done before the next iteration loads into it
  }
  write_rows(dk, dka, {scale, scale}, true, b, j0, h, a.Lk, a.nh, a.d, gr.nk, gr, L);
  write_rows(dv, dva, {1.f, 1.f}, true, b, j0, h, a.Lk, a.nh, a.d, gr.nk, gr, L);
}

// The query-side backward's shared memory: the block's query and output-gradient tiles with their rows' lse and delta,
// two stages of key and value tiles.
struct QuerySmem {
  bf16 *q, *dout, *k[2], *v[2];  // [kTile, Dp + kPad] each
  float *lse, *delta;            // [kTile], lse in log2 units
};
__host__ __device__ QuerySmem query_smem(Carve& c, int Dp) {
  QuerySmem m;
  m.q = c.take<bf16>(kTile * (Dp + kPad)), m.dout = c.take<bf16>(kTile * (Dp + kPad));
  for (int s = 0; s < 2; ++s) m.k[s] = c.take<bf16>(kTile * (Dp + kPad)), m.v[s] = c.take<bf16>(kTile * (Dp + kPad));
  m.lse = c.take<float>(kTile), m.delta = c.take<float>(kTile);
  return m;
}

// Block (group x query tile, h, b): dq of its 64 queries, over every key tile of the group: p = exp2(q k^T - lse),
// ds = p (dout v^T - delta), dq += ds k.
__global__ void __launch_bounds__(kFlashThreads)
    flash_dq_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse, const uint16_t* dout,
                    const float* delta, uint16_t* dq, FlashRows rows, int Dp, float scale) {
  const QuerySmem m = shared_layout(query_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_q);
  const int64_t i0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (i0 >= gr.nq) return;  // the whole block: a tile past a small cell
  const Lane L = lane_of();
  const bool async = stageable(a.d, q, k, v, dout);
  const int64_t tiles = (gr.nk + kTile - 1) / kTile;
  stage_pair(m.q, m.dout, q, dout, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr, async);
  stage_stats(m.lse, m.delta, lse, delta, a, b, h, i0, gr);
  stage_pair(m.k[0], m.v[0], k, v, b, 0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr, async);
  ptx::cp_async_commit();
  const float scale2 = scale * kLog2e;
  float dqa[kMaxDp / 8][4] = {};
  for (int64_t jt = 0; jt < tiles; ++jt) {
    const int s = int(jt % 2);
    const int64_t j0 = jt * kTile;
    if (jt + 1 < tiles)
      stage_pair(m.k[1 - s], m.v[1 - s], k, v, b, j0 + kTile, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr, async);
    previous_stage_ready();
    float sc[kTile / 8][4], ds[kTile / 8][4];
    scores(sc, m.q, m.k[s], Dp, L);     // s = q k^T
    scores(ds, m.dout, m.v[s], Dp, L);  // dp = dout v^T
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 16 * L.w + L.g + 8 * (e / 2);  // the query in the tile
        const bool valid = i0 + r < gr.nq && j0 + 8 * n + 2 * L.t + e % 2 < gr.nk;
        const float p = valid ? exp2f(sc[n][e] * scale2 - m.lse[r]) : 0.f;
        ds[n][e] = p * (ds[n][e] - m.delta[r]);
      }
    uint32_t f[kTile / 16][4];
    a_fragments(f, ds);
    accumulate(dqa, f, m.k[s], Dp, L);  // dq += ds k (scaled below)
    __syncthreads();                    // every read of stage s done before the next iteration loads into it
  }
  write_rows(dq, dqa, {scale, scale}, true, b, i0, h, a.Lq, a.nh, a.d, gr.nq, gr, L);
}

int padded_head_dim(const AttentionDims& a) {
  MS_CHECK(a.d > 0 && a.d <= kFlashMaxHeadDim, "flash attention: head dim ", a.d, " must be in 1..", kFlashMaxHeadDim);
  MS_CHECK(a.Lq > 0 && a.Lk > 0 && a.nh > 0 && a.B > 0, "flash attention: empty dims");
  MS_CHECK(a.nh <= 65535 && a.B <= 65535, "flash attention: at most 65535 heads and samples");
  return int((a.d + 15) / 16 * 16);
}

// Launches kernel over (groups x tiles of `rows_per_group`, nh, B) with the dynamic shared memory its layout needs.
template <class Kernel, class Layout, class... Args>
void launch(Kernel kernel, Layout layout, int64_t rows_per_group, const FlashRows& rows, Stream stream, Args... args) {
  const int Dp = padded_head_dim(rows.a);
  Carve count{0};
  layout(count, Dp);
  const int bytes = int(count.at);
  MS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int64_t blocks = rows.groups * ((rows_per_group + kTile - 1) / kTile);
  MS_CHECK(blocks < (int64_t(1) << 31), "flash attention: ", blocks, " tiles per head");
  const dim3 grid(unsigned(blocks), unsigned(rows.a.nh), unsigned(rows.a.B));
  kernel<<<grid, kFlashThreads, size_t(bytes), stream>>>(args..., rows, Dp, 1.f / sqrtf(float(rows.a.d)));
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

FlashRows dense_rows(const AttentionDims& a) {
  FlashRows r;
  r.a = a;
  r.max_q = a.Lq;
  r.max_k = a.Lk;
  return r;
}

FlashRows window_rows(const VideoAttentionDims& d, const std::array<int64_t, 3>& window, bool shifted) {
  FlashRows r;
  r.a = {d.B, d.L(), d.L(), d.nh, d.d};
  const int64_t ext[3] = {d.T, d.H, d.W};
  r.max_q = 1;
  for (int i = 0; i < 3; ++i) {  // the cells of window_attention.cpp's AxisCells
    MS_CHECK(window[size_t(i)] > 0, "window attention: window size ", window[size_t(i)]);
    r.ext[i] = ext[i];
    r.k[i] = std::min(window[size_t(i)], ext[i]);
    const int64_t s = shifted && window[size_t(i)] < ext[i] ? r.k[i] / 2 : 0;
    r.o[i] = s > 0 ? s - r.k[i] : 0;
    r.n[i] = (ext[i] - r.o[i] + r.k[i] - 1) / r.k[i];
    r.max_q *= r.k[i];
  }
  r.groups = r.n[0] * r.n[1] * r.n[2];
  r.max_k = r.max_q;
  return r;
}

void flash_attention_forward(const AttentionTensors<uint16_t, float>& t, const FlashRows& rows, Stream stream) {
  launch(flash_forward_kernel, forward_smem, rows.max_q, rows, stream, t.q, t.k, t.v, t.out, t.lse);
}

void flash_attention_backward(const AttentionTensors<uint16_t, float>& t, const float* delta, const FlashRows& rows,
                              Stream stream) {
  const float* lse = t.lse;
  launch(flash_dkv_kernel, key_smem, rows.max_k, rows, stream, t.q, t.k, t.v, lse, t.dout, delta, t.dk, t.dv);
  launch(flash_dq_kernel, query_smem, rows.max_q, rows, stream, t.q, t.k, t.v, lse, t.dout, delta, t.dq);
}

}  // namespace ms::cuda
