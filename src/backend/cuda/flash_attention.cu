#include <cuda_bf16.h>
#include <mma.h>

#include <algorithm>
#include <cmath>

#include "backend/cuda/flash_attention.h"
#include "backend/cuda/kernel_util.cuh"

namespace ms::cuda {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTile = 64;  // query and key rows per tile
constexpr int kWarps = 4;  // warp w owns rows 16 w .. 16 w + 15 of the block's own tile
constexpr int kFlashThreads = 32 * kWarps;
constexpr int kMma = 16;  // the WMMA shape: 16 x 16 x 16
constexpr float kLog2e = 1.4426950408889634f;

using FragA = wmma::fragment<wmma::matrix_a, kMma, kMma, kMma, bf16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, kMma, kMma, kMma, bf16, wmma::row_major>;
using FragBt = wmma::fragment<wmma::matrix_b, kMma, kMma, kMma, bf16, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kMma, kMma, kMma, float>;

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

// The calling thread's place: warp w owns the tile's rows 16 w .. 16 w + 15; lanes 2 r and 2 r + 1 share row
// 16 w + r, each taking half of its columns.
struct Lane {
  int w, half, row;
};
__device__ Lane lane_of() {
  const int w = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  return {w, lane % 2, w * kMma + lane / 2};
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

// Head h of sample b, group rows r0 .. r0 + kTile (count in the group, tokens by gr) of a [B, L, nh, d] tensor into
// tile [kTile, Dp]: zeros past the group's rows and past d.
__device__ void load_tile(bf16* tile, const uint16_t* x, int64_t b, int64_t r0, int64_t h, int64_t L, int64_t nh,
                          int64_t d, int Dp, int64_t count, const Group& gr) {
  const bf16* src = reinterpret_cast<const bf16*>(x);
  for (int e = threadIdx.x; e < kTile * Dp; e += blockDim.x) {
    const int r = e / Dp, c = e % Dp;
    const int64_t i = r0 + r;
    tile[e] = i < count && c < d ? src[((b * L + gr.token(i)) * nh + h) * d + c] : __float2bfloat16(0.f);
  }
}

// out [16, ldo] fp32 = a [16, Dp] times b^T, b [kTile, Dp]: one warp's rows of a tile of scores.
__device__ void mma_abt(float* out, int ldo, const bf16* a, const bf16* b, int Dp) {
  for (int n = 0; n < kTile; n += kMma) {
    FragC acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k = 0; k < Dp; k += kMma) {
      FragA fa;
      FragBt fb;
      wmma::load_matrix_sync(fa, a + k, unsigned(Dp));
      wmma::load_matrix_sync(fb, b + n * Dp + k, unsigned(Dp));
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n, acc, unsigned(ldo), wmma::mem_row_major);
  }
}

// acc [16, Dp] fp32 += a [16, kTile] (row stride kTile) times b [kTile, Dp]: one warp's rows.
__device__ void mma_ab_acc(float* acc, const bf16* a, const bf16* b, int Dp) {
  for (int n = 0; n < Dp; n += kMma) {
    FragC c;
    wmma::load_matrix_sync(c, acc + n, unsigned(Dp), wmma::mem_row_major);
    for (int k = 0; k < kTile; k += kMma) {
      FragA fa;
      FragB fb;
      wmma::load_matrix_sync(fa, a + k, unsigned(kTile));
      wmma::load_matrix_sync(fb, b + k * Dp + n, unsigned(Dp));
      wmma::mma_sync(c, fa, fb, c);
    }
    wmma::store_matrix_sync(acc + n, c, unsigned(Dp), wmma::mem_row_major);
  }
}

// Group rows r0 .. r0 + kTile (count in the group, tokens by gr) of a [B, L, nh, d] bf16 tensor, the block's
// sample and head: channels c < d get their value + scale * acc[r, c].
__device__ void accumulate_rows(uint16_t* x, const float* acc, float scale, int64_t b, int64_t r0, int64_t h, int64_t L,
                                int64_t nh, int64_t d, int Dp, int64_t count, const Group& gr) {
  for (int e = threadIdx.x; e < kTile * Dp; e += blockDim.x) {
    const int r = e / Dp, c = e % Dp;
    const int64_t i = r0 + r;
    if (i < count && c < d) {
      const int64_t at = ((b * L + gr.token(i)) * nh + h) * d + c;
      store(x, at, load(x, at) + scale * acc[e]);
    }
  }
}

struct ForwardSmem {
  bf16 *q, *k, *v, *p;  // [kTile, Dp] x 3, [kTile, kTile]
  float *s, *o;         // [kTile, kTile], [kTile, Dp]
};
__host__ __device__ ForwardSmem forward_smem(Carve& c, int Dp) {
  ForwardSmem m;
  m.q = c.take<bf16>(kTile * Dp), m.k = c.take<bf16>(kTile * Dp), m.v = c.take<bf16>(kTile * Dp);
  m.p = c.take<bf16>(kTile * kTile);
  m.s = c.take<float>(kTile * kTile), m.o = c.take<float>(kTile * Dp);
  return m;
}

// Block (group x query tile, h, b): out, lse for its 64 queries, over every key tile of the group.
__global__ void __launch_bounds__(kFlashThreads)
    flash_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, uint16_t* out, float* lse,
                         FlashRows rows, int Dp, float scale) {
  const ForwardSmem m = shared_layout(forward_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_q);
  const int64_t i0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (i0 >= gr.nq) return;                // the whole block: a tile past a small cell
  const auto [w, half, row] = lane_of();  // row: the lane's query row in the tile
  load_tile(m.q, q, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
  for (int e = threadIdx.x; e < kTile * Dp; e += blockDim.x) m.o[e] = 0.f;
  const float scale2 = scale * kLog2e;  // scores in log2 units
  float mx = -INFINITY, l = 0;          // the row's running max and sum
  for (int64_t j0 = 0; j0 < gr.nk; j0 += kTile) {
    __syncthreads();  // the previous tile's k and v are no longer read
    load_tile(m.k, k, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
    load_tile(m.v, v, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
    __syncthreads();
    mma_abt(m.s + w * kMma * kTile, kTile, m.q + w * kMma * Dp, m.k, Dp);
    __syncwarp();
    float* s = m.s + row * kTile;
    float tile_max = -INFINITY;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      s[c] = j0 + c < gr.nk ? s[c] * scale2 : -INFINITY;
      tile_max = fmaxf(tile_max, s[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
    const float mnew = fmaxf(mx, tile_max), alpha = exp2f(mx - mnew);  // every tile has a valid key: mnew finite
    float sum = 0;
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const bf16 p = __float2bfloat16(exp2f(s[c] - mnew));
      m.p[row * kTile + c] = p;
      sum += __bfloat162float(p);  // the rounded p that the product uses: the normalisation matches it
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * alpha + sum;
    mx = mnew;
    for (int c = half; c < Dp; c += 2) m.o[row * Dp + c] *= alpha;
    __syncwarp();
    mma_ab_acc(m.o + w * kMma * Dp, m.p + w * kMma * kTile, m.v, Dp);
    __syncwarp();
  }
  if (i0 + row < gr.nq) {
    const int64_t i = gr.token(i0 + row);
    uint16_t* o = out + ((b * a.Lq + i) * a.nh + h) * a.d;
    for (int c = half; c < a.d; c += 2) store(o, c, m.o[row * Dp + c] / l);
    if (half == 0) lse[(b * a.nh + h) * a.Lq + i] = (mx + log2f(l)) / kLog2e;
  }
}

struct KeySmem {
  bf16 *k, *v, *q, *dout, *pt, *dst;  // [kTile, Dp] x 4, [kTile, kTile] x 2 (key rows by query columns)
  float *dk, *dv, *st, *dpt;          // [kTile, Dp] x 2, [kTile, kTile] x 2
  float *lse, *delta;                 // [kTile] of the query tile, lse in log2 units
};
__host__ __device__ KeySmem key_smem(Carve& c, int Dp) {
  KeySmem m;
  m.k = c.take<bf16>(kTile * Dp), m.v = c.take<bf16>(kTile * Dp), m.q = c.take<bf16>(kTile * Dp);
  m.dout = c.take<bf16>(kTile * Dp), m.pt = c.take<bf16>(kTile * kTile), m.dst = c.take<bf16>(kTile * kTile);
  m.dk = c.take<float>(kTile * Dp), m.dv = c.take<float>(kTile * Dp);
  m.st = c.take<float>(kTile * kTile), m.dpt = c.take<float>(kTile * kTile);
  m.lse = c.take<float>(kTile), m.delta = c.take<float>(kTile);
  return m;
}

// Loads one query tile's lse (in log2 units) and delta, zeros past the group's queries.
__device__ void load_row_stats(float* lse2, float* dl, const float* lse, const float* delta, const AttentionDims& a,
                               int64_t b, int64_t h, int64_t i0, const Group& gr) {
  for (int r = threadIdx.x; r < kTile; r += blockDim.x) {
    const bool valid = i0 + r < gr.nq;
    const int64_t at = (b * a.nh + h) * a.Lq + (valid ? gr.token(i0 + r) : 0);
    lse2[r] = valid ? lse[at] * kLog2e : 0.f;
    dl[r] = valid ? delta[at] : 0.f;
  }
}

// Block (group x key tile, h, b): dk, dv of its 64 keys, over every query tile of the group. p^T and ds^T per
// warp's key rows.
__global__ void __launch_bounds__(kFlashThreads)
    flash_dkv_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse, const uint16_t* dout,
                     const float* delta, uint16_t* dk, uint16_t* dv, FlashRows rows, int Dp, float scale) {
  const KeySmem m = shared_layout(key_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_k);
  const int64_t j0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (j0 >= gr.nk) return;  // the whole block: a tile past a small cell
  const auto [w, half, row] = lane_of();
  load_tile(m.k, k, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
  load_tile(m.v, v, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
  for (int e = threadIdx.x; e < kTile * Dp; e += blockDim.x) m.dk[e] = m.dv[e] = 0.f;
  const float scale2 = scale * kLog2e;
  const bool key_valid = j0 + row < gr.nk;
  for (int64_t i0 = 0; i0 < gr.nq; i0 += kTile) {
    __syncthreads();
    load_tile(m.q, q, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
    load_tile(m.dout, dout, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
    load_row_stats(m.lse, m.delta, lse, delta, a, b, h, i0, gr);
    __syncthreads();
    mma_abt(m.st + w * kMma * kTile, kTile, m.k + w * kMma * Dp, m.q, Dp);      // s^T = k q^T
    mma_abt(m.dpt + w * kMma * kTile, kTile, m.v + w * kMma * Dp, m.dout, Dp);  // dp^T = v dout^T
    __syncwarp();
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const int at = row * kTile + c;
      const float p = key_valid && i0 + c < gr.nq ? exp2f(m.st[at] * scale2 - m.lse[c]) : 0.f;
      m.pt[at] = __float2bfloat16(p);
      m.dst[at] = __float2bfloat16(p * (m.dpt[at] - m.delta[c]));
    }
    __syncwarp();
    mma_ab_acc(m.dv + w * kMma * Dp, m.pt + w * kMma * kTile, m.dout, Dp);  // dv += p^T dout
    mma_ab_acc(m.dk + w * kMma * Dp, m.dst + w * kMma * kTile, m.q, Dp);    // dk += ds^T q (scaled below)
    __syncwarp();
  }
  __syncthreads();
  accumulate_rows(dk, m.dk, scale, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
  accumulate_rows(dv, m.dv, 1.f, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
}

struct QuerySmem {
  bf16 *q, *dout, *k, *v, *ds;  // [kTile, Dp] x 4, [kTile, kTile]
  float *dq, *s, *dp;           // [kTile, Dp], [kTile, kTile] x 2
  float *lse, *delta;           // [kTile], lse in log2 units
};
__host__ __device__ QuerySmem query_smem(Carve& c, int Dp) {
  QuerySmem m;
  m.q = c.take<bf16>(kTile * Dp), m.dout = c.take<bf16>(kTile * Dp), m.k = c.take<bf16>(kTile * Dp);
  m.v = c.take<bf16>(kTile * Dp), m.ds = c.take<bf16>(kTile * kTile);
  m.dq = c.take<float>(kTile * Dp), m.s = c.take<float>(kTile * kTile), m.dp = c.take<float>(kTile * kTile);
  m.lse = c.take<float>(kTile), m.delta = c.take<float>(kTile);
  return m;
}

// Block (group x query tile, h, b): dq of its 64 queries, over every key tile of the group.
__global__ void __launch_bounds__(kFlashThreads)
    flash_dq_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const float* lse, const uint16_t* dout,
                    const float* delta, uint16_t* dq, FlashRows rows, int Dp, float scale) {
  const QuerySmem m = shared_layout(query_smem, Dp);
  const AttentionDims& a = rows.a;
  const BlockRows br = block_rows(rows, rows.max_q);
  const int64_t i0 = br.r0, h = br.h, b = br.b;
  const Group& gr = br.g;
  if (i0 >= gr.nq) return;  // the whole block: a tile past a small cell
  const auto [w, half, row] = lane_of();
  load_tile(m.q, q, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
  load_tile(m.dout, dout, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
  load_row_stats(m.lse, m.delta, lse, delta, a, b, h, i0, gr);
  for (int e = threadIdx.x; e < kTile * Dp; e += blockDim.x) m.dq[e] = 0.f;
  const float scale2 = scale * kLog2e;
  const bool query_valid = i0 + row < gr.nq;
  for (int64_t j0 = 0; j0 < gr.nk; j0 += kTile) {
    __syncthreads();
    load_tile(m.k, k, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
    load_tile(m.v, v, b, j0, h, a.Lk, a.nh, a.d, Dp, gr.nk, gr);
    __syncthreads();
    mma_abt(m.s + w * kMma * kTile, kTile, m.q + w * kMma * Dp, m.k, Dp);      // s = q k^T
    mma_abt(m.dp + w * kMma * kTile, kTile, m.dout + w * kMma * Dp, m.v, Dp);  // dp = dout v^T
    __syncwarp();
    for (int c = half * 32; c < half * 32 + 32; ++c) {
      const int at = row * kTile + c;
      const float p = query_valid && j0 + c < gr.nk ? exp2f(m.s[at] * scale2 - m.lse[row]) : 0.f;
      m.ds[at] = __float2bfloat16(p * (m.dp[at] - m.delta[row]));
    }
    __syncwarp();
    mma_ab_acc(m.dq + w * kMma * Dp, m.ds + w * kMma * kTile, m.k, Dp);  // dq += ds k (scaled below)
    __syncwarp();
  }
  __syncthreads();
  accumulate_rows(dq, m.dq, scale, b, i0, h, a.Lq, a.nh, a.d, Dp, gr.nq, gr);
}

int padded_head_dim(const AttentionDims& a) {
  MS_CHECK(a.d > 0 && a.d <= kFlashMaxHeadDim, "flash attention: head dim ", a.d, " must be in 1..", kFlashMaxHeadDim);
  MS_CHECK(a.Lq > 0 && a.Lk > 0 && a.nh > 0 && a.B > 0, "flash attention: empty dims");
  MS_CHECK(a.nh <= 65535 && a.B <= 65535, "flash attention: at most 65535 heads and samples");
  return int((a.d + kMma - 1) / kMma * kMma);
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
