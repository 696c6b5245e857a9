// The DSA kernels on the GPU (ops/dsa.h, CUDA section): the sampling geometry of docs/attention.md, which the CPU
// kernels implement too, on bf16 tensors. Two sets: the tensor-core kernels (halo_*, further down: head dims up to
// 128, up to 64 slots) and the staged kernels (fp32 throughout, any head dim up to 256), which run the rest.
//
// The staged kernels. The forward and the backward's per-query pass are staged: a block takes a tile of up to 32
// queries (w fastest) of one head (one offset group in the backward) and stages the K or V halo its samples can reach,
// the box of tokens within the tile's largest |offset| per axis of its windows, in shared memory, 64 channels at a
// time. Each warp takes a query at a time: its lanes compute the slots' geometry, a slot each, into shared memory
// (SlotGeo), then interpolate the slots' keys and values from the staged rows, two channels each (a corner outside the
// box, where the halo outgrows the staging space, from global memory). Scores are summed over the chunks, so the
// softmax runs once they are complete: the forward is two passes (K, then V), and the backward's per-query pass three
// (K and V for the dot products, K again for dq). Backward without atomics on the gradients, in two kernels:
// - per query, block (b, group, tile) over the group's heads in head order: probabilities a and score gradients ds
//   of every slot (saved as coefficients), dq, and the position gradients summed over the group's heads (shared
//   memory) into doffsets;
// - per key, warp (b, n, j): dk_j += sum ds w q_i and dv_j += sum a w dout_i over the (query i, slot) pairs with j as
//   a corner of weight w. The candidate queries per slot are a box, bounded by the largest |offset| per axis (found
//   first, with an order-free atomicMax); the pairs are visited in a fixed order (slots, then the box in raster order).
// Every sum therefore runs in an order fixed by the shapes and the offsets: deterministic.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <climits>
#include <initializer_list>
#include <type_traits>

#include "backend/cuda/dsa.h"
#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/mma_tile.cuh"
#include "backend/cuda/ptx.cuh"
#include "core/log.h"

namespace ms::cuda {
namespace {

constexpr int kWarps = 4;         // warps per block of the per-key backward
constexpr int kTileWarps = 8;     // warps per block of the staged kernels (forward, per-query backward)
constexpr int kTileQueries = 32;  // queries per staged block at most
constexpr int kChunk = 64;        // channels of a staged row: two per lane
// A staged block's per-(query, slot) floats at most (fewer queries if P is large).
constexpr size_t kSlotBytes = 48 * 1024;
constexpr size_t kMaxSharedBytes = 227 * 1024;  // dynamic shared memory per block on sm_90

struct Geo {
  int ext[3], win[3], kc[3];  // extents, windows, clipped windows k' = min(k, E)
  int tile[3], ntile[3];      // a staged block's queries per axis, and the blocks per axis
  int halo;                   // staged rows at most (0: none)
  int unit;                   // channels per staging copy: 8 (16 bytes), 2 or 1, as d and the tensors' alignment allow
  int64_t B, L;
  int nh, d, G, P;
  float scale;

  __device__ int64_t row(int64_t b, int64_t tok, int n) const { return ((b * L + tok) * nh + n) * d; }
  __device__ int64_t token(const int* c) const { return (int64_t(c[0]) * ext[1] + c[1]) * ext[2] + c[2]; }
  __device__ void coords(int64_t tok, int* c) const {
    c[0] = int(tok / (ext[1] * ext[2]));
    c[1] = int(tok / ext[2] % ext[1]);
    c[2] = int(tok % ext[2]);
  }
  __device__ int start(int i, int axis) const { return min(max(i - kc[axis] / 2, 0), ext[axis] - kc[axis]); }
  __device__ int slot(int jt, int jh, int jw) const { return (jt * win[1] + jh) * win[2] + jw; }
  __device__ int valid_slots() const { return kc[0] * kc[1] * kc[2]; }
  // The u-th valid slot in slot order.
  __device__ int valid_slot(int u) const { return slot(u / (kc[1] * kc[2]), u / kc[2] % kc[1], u % kc[2]); }
  __device__ int queries() const { return tile[0] * tile[1] * tile[2]; }
  __device__ int64_t tiles() const { return int64_t(ntile[0]) * ntile[1] * ntile[2]; }
  // Offsets [P, 3] of query token l of batch b in group grp, or null.
  __device__ const uint16_t* offsets_of(const uint16_t* off, int64_t b, int64_t l, int grp) const {
    return off ? off + ((b * L + l) * G + grp) * P * 3 : nullptr;
  }
};

// Linear interpolation along one axis at base + offset, the position clamped to the grid (docs/attention.md).
struct Axis {
  int i0, i1;  // corners floor(pos), min(floor(pos) + 1, E - 1)
  float f;     // weight of i1; i0 gets 1 - f
  float g;     // d pos / d offset: 1 strictly inside (0, E - 1), 0 where clamped
};

__device__ inline Axis axis_sample(int base, float offset, int E) {
  const float raw = float(base) + offset, hi = float(E - 1);
  const float pos = raw != raw ? raw : fminf(fmaxf(raw, 0.f), hi);  // a NaN offset propagates, reading corner 0
  Axis a;
  a.i0 = pos >= 0.f ? min(int(pos), E - 1) : 0;
  a.i1 = min(a.i0 + 1, E - 1);
  a.f = pos - float(a.i0);
  a.g = raw > 0.f && raw < hi ? 1.f : 0.f;
  return a;
}

// Corner c = (ct * 2 + ch) * 2 + cw of a trilinear sample (bit 1: the upper corner on that axis): its weight from the
// axes' upper weights f, multiplied in t, h, w order, and (when dw) the weight's derivatives per axis, g the axes'
// d pos / d offset.
__device__ inline float corner_weight(const float* f, const float* g, int c, float* dw) {
  float wa[3], da[3];
  for (int i = 0; i < 3; ++i) {
    const bool up = c >> (2 - i) & 1;
    wa[i] = up ? f[i] : 1.f - f[i];
    da[i] = up ? g[i] : -g[i];
  }
  if (dw) {
    dw[0] = da[0] * wa[1] * wa[2];
    dw[1] = wa[0] * da[1] * wa[2];
    dw[2] = wa[0] * wa[1] * da[2];
  }
  return wa[0] * wa[1] * wa[2];
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The larger of a and b, NaN if either is.
__device__ inline float nan_max(float a, float b) { return a != a ? a : !(b <= a) ? b : a; }

__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The lane's channels c = lane + 32 t of a row, zero past d.
template <int CH>
__device__ inline void add_row(uint16_t* r, int d, const float (&x)[CH]) {
  for (int t = 0; t < CH; ++t) {
    const int c = int(threadIdx.x % 32) + 32 * t;
    if (c < d) store(r, c, load(r, c) + x[t]);
  }
}

template <int CH>
__device__ inline void axpy_row(float w, const uint16_t* r, int d, float (&acc)[CH]) {
  for (int t = 0; t < CH; ++t) {
    const int c = int(threadIdx.x % 32) + 32 * t;
    if (c < d) acc[t] += w * load(r, c);
  }
}

// The staged kernels hold a lane's channel pair c, c + 1 (c = c0 + 2 lane of a chunk c0) as a float2.
__device__ inline float2 lane_pair(const uint16_t* row, int limit, int c) {
  return make_float2(c < limit ? load(row, c) : 0.f, c + 1 < limit ? load(row, c + 1) : 0.f);
}
__device__ inline void axpy(float w, float2 x, float2& acc) {
  acc.x += w * x.x;
  acc.y += w * x.y;
}
__device__ inline float pair_dot(float2 a, float2 b) { return warp_sum(a.x * b.x + a.y * b.y); }
__device__ inline void add_pair(uint16_t* row, int d, int c, float2 x) {
  if (c < d) store(row, c, load(row, c) + x.x);
  if (c + 1 < d) store(row, c + 1, load(row, c + 1) + x.y);
}

// A staged block's queries: the tile's first coordinates c0 and its extents n per axis, clipped at the grid's end.
struct Tile {
  int c0[3], n[3];

  // Query qi's coordinates (w fastest); false past the grid's end.
  __device__ bool query(const Geo& g, int qi, int* c) const {
    const int u[3] = {qi / (g.tile[1] * g.tile[2]), qi / g.tile[2] % g.tile[1], qi % g.tile[2]};
    for (int i = 0; i < 3; ++i) {
      if (u[i] >= n[i]) return false;
      c[i] = c0[i] + u[i];
    }
    return true;
  }
};

__device__ inline Tile tile_of(const Geo& g, int64_t t) {
  const int64_t u[3] = {t / (g.ntile[1] * g.ntile[2]), t / g.ntile[2] % g.ntile[1], t % g.ntile[2]};
  Tile r;
  for (int i = 0; i < 3; ++i) {
    r.c0[i] = int(u[i]) * g.tile[i];
    r.n[i] = min(g.tile[i], g.ext[i] - r.c0[i]);
  }
  return r;
}

// reach[axis] (shared) = the largest |offset| along the axis over the tile's queries in group grp, as float bits
// (for non-negative floats, and NaN above +inf, the unsigned order is the float order: the maxima are exact in any
// order).
__device__ inline void tile_reach(const Geo& g, const Tile& t, int64_t b, int grp, const uint16_t* offsets,
                                  unsigned* reach) {
  if (threadIdx.x < 3) reach[threadIdx.x] = 0;
  __syncthreads();
  const int per = g.P * 3;
  unsigned m[3] = {};
  for (int i = int(threadIdx.x); i < g.queries() * per; i += int(blockDim.x)) {
    int c[3];
    if (t.query(g, i / per, c))
      m[i % 3] = max(m[i % 3], __float_as_uint(fabsf(load(g.offsets_of(offsets, b, g.token(c), grp), i % per))));
  }
  for (int a = 0; a < 3; ++a) {
    for (int o = 16; o > 0; o >>= 1) m[a] = max(m[a], __shfl_xor_sync(0xffffffffu, m[a], o));
    if (threadIdx.x % 32 == 0) atomicMax(reach + a, m[a]);
  }
  __syncthreads();
}

// The tokens a block stages: lo .. lo + n - 1 per axis, rows in raster order; none when n is 0.
struct Box {
  int lo[3], n[3];

  __device__ int rows() const { return n[0] * n[1] * n[2]; }
  // The coordinates of row r (raster order).
  __device__ void coords(int r, int* at) const {
    at[0] = lo[0] + r / (n[1] * n[2]);
    at[1] = lo[1] + r / n[2] % n[1];
    at[2] = lo[2] + r % n[2];
  }
  // The staged row of the token at coordinates at, or -1.
  __device__ int local(const int* at) const {
    int r = 0;
    for (int i = 0; i < 3; ++i) {
      const int u = at[i] - lo[i];
      if (unsigned(u) >= unsigned(n[i])) return -1;
      r = r * n[i] + u;
    }
    return r;
  }
};

// The halo of a tile: the tokens its samples' corners can be, for offsets within reach (null: no offsets). A sample
// of slot j lies within r of its base s + j, so its corners lie in [s + j - ceil(r), s + j + floor(r) + 1] (the
// upper corner counts even at weight zero: the position gradients read it). If that holds more than g.halo rows,
// the margins shrink, the longest axis first, and then the box may be empty; corners outside it are read from
// global memory, so the box decides speed, never results.
__device__ inline Box halo_box(const Geo& g, const Tile& t, const unsigned* reach) {
  int base_lo[3], base_hi[3], mlo[3], mhi[3];
  for (int i = 0; i < 3; ++i) {
    base_lo[i] = g.start(t.c0[i], i);
    base_hi[i] = g.start(t.c0[i] + t.n[i] - 1, i) + g.kc[i] - 1;
    const float r = reach ? __uint_as_float(reach[i]) : 0.f;
    const bool inside = r < float(g.ext[i]);  // false for NaN
    mlo[i] = min(inside ? int(ceilf(r)) : g.ext[i], base_lo[i]);
    mhi[i] = min(!reach ? 0 : inside ? int(floorf(r)) + 1 : g.ext[i], g.ext[i] - 1 - base_hi[i]);
  }
  Box box;
  for (;;) {
    int64_t rows = 1;
    for (int i = 0; i < 3; ++i) {
      box.lo[i] = base_lo[i] - mlo[i];
      box.n[i] = base_hi[i] + mhi[i] - box.lo[i] + 1;
      rows *= box.n[i];
    }
    if (rows <= g.halo) return box;
    int a = -1;
    for (int i = 0; i < 3; ++i)
      if (mlo[i] + mhi[i] > 0 && (a < 0 || box.n[i] > box.n[a])) a = i;
    if (a < 0) {
      box.n[0] = box.n[1] = box.n[2] = 0;
      return box;
    }
    mlo[a] = max(mlo[a] - 1, 0);
    mhi[a] = max(mhi[a] - 1, 0);
  }
}

// staged [box rows, kChunk] = channels c0 .. c0 + kChunk - 1 of the box's rows of x (head n of batch b), zero past
// d, copied in units U of sizeof(U) / 2 channels (d a multiple of them, x aligned to U).
template <class U>
__device__ inline void stage_units(const Geo& g, const Box& box, const uint16_t* x, int64_t b, int n, int c0,
                                   uint16_t* staged) {
  constexpr int kPer = int(sizeof(U) / 2), kUnits = kChunk / kPer;
  for (int i = int(threadIdx.x); i < box.rows() * kUnits; i += int(blockDim.x)) {
    const int r = i / kUnits, c = c0 + i % kUnits * kPer;
    int at[3];
    box.coords(r, at);
    reinterpret_cast<U*>(staged)[i] = c < g.d ? *reinterpret_cast<const U*>(x + g.row(b, g.token(at), n) + c) : U{};
  }
}

// The same in the widest unit g.unit allows. Every thread of the block calls it; it waits for the previous chunk's
// readers and for the copy.
__device__ inline void stage(const Geo& g, const Box& box, const uint16_t* x, int64_t b, int n, int c0,
                             uint16_t* staged) {
  __syncthreads();
  if (g.unit == 8)
    stage_units<uint4>(g, box, x, b, n, c0, staged);
  else if (g.unit == 2)
    stage_units<unsigned>(g, box, x, b, n, c0, staged);
  else
    stage_units<uint16_t>(g, box, x, b, n, c0, staged);
  __syncthreads();
}

// Where a staged block's chunk starts in its shared memory: after its `floats` floats, 16-byte aligned.
__host__ __device__ inline int64_t staged_offset(int64_t floats) { return (floats + 3) / 4 * 4 * 4; }

// One slot of a query, as a lane computes it for its warp: its slot p; per corner its row (>= 0: the staged row,
// else -1 - its token, read from global memory) and weight; per axis the upper corner's weight f and d pos / d offset
// g, from which the weights' derivatives follow (corner_weight).
struct SlotGeo {
  int p;
  int row[8];
  float w[8];
  float f[3], g[3];
};
constexpr int kGeoBytes = kTileWarps * 32 * int(sizeof(SlotGeo));  // a block's: 32 slots per warp

// A tensor's rows as the staged kernels read one chunk of them: from the staged box where the token lies in it, else
// from global memory.
struct Source {
  const uint16_t* x;
  const uint16_t* staged;
  int64_t b;
  int n, c0;

  // The lane's channel pair of a row (SlotGeo::row).
  __device__ float2 pair(const Geo& g, int row) const {
    const int lane2 = 2 * int(threadIdx.x % 32);
    return row >= 0 ? lane_pair(staged + row * kChunk, kChunk, lane2)
                    : lane_pair(x + g.row(b, -1 - row, n), g.d, c0 + lane2);
  }
  // The lane's channel pair of slot s's row interpolated from its corners (those of zero weight skipped, as the CPU
  // drops them).
  __device__ float2 interpolate(const Geo& g, const SlotGeo& s) const {
    float2 r = make_float2(0.f, 0.f);
    for (int c = 0; c < 8; ++c)
      if (s.w[c] != 0.f) axpy(s.w[c], pair(g, s.row[c]), r);
    return r;
  }
};

// Calls f(SlotGeo) for the valid slots of query coordinates qc in slot order, their geometry computed by the warp 32
// slots at a time, a slot per lane, into its buffer geo [32]; off [P, 3] the query's offsets in its group, or null.
template <class F>
__device__ inline void for_each_slot(const Geo& g, const Box& box, const int* qc, const uint16_t* off, SlotGeo* geo,
                                     F f) {
  const int lane = int(threadIdx.x % 32), nv = g.valid_slots();
  for (int u0 = 0; u0 < nv; u0 += 32) {
    __syncwarp();  // the previous round's readers are done
    if (u0 + lane < nv) {
      const int u = u0 + lane, j[3] = {u / (g.kc[1] * g.kc[2]), u / g.kc[2] % g.kc[1], u % g.kc[2]};
      SlotGeo& s = geo[lane];
      s.p = g.slot(j[0], j[1], j[2]);
      Axis ax[3];
      for (int i = 0; i < 3; ++i) {
        ax[i] = axis_sample(g.start(qc[i], i) + j[i], off ? load(off, s.p * 3 + i) : 0.f, g.ext[i]);
        s.f[i] = ax[i].f;
        s.g[i] = ax[i].g;
      }
      for (int c = 0; c < 8; ++c) {
        int at[3];
        for (int i = 0; i < 3; ++i) at[i] = c >> (2 - i) & 1 ? ax[i].i1 : ax[i].i0;
        const int r = box.local(at);
        s.row[c] = r >= 0 ? r : -1 - int(g.token(at));
        s.w[c] = corner_weight(s.f, s.g, c, nullptr);
      }
    }
    __syncwarp();
    for (int v = 0; v < min(32, nv - u0); ++v) f(geo[v]);
  }
}

// A staged block: its batch, tile and halo. Blocks run (batch, head or group, tile) with the tile fastest.
struct Block {
  int64_t b;
  int h;  // head (forward) or group (backward)
  Tile tile;
  Box box;
};

__device__ inline Block block_of(const Geo& g, int heads, const uint16_t* offsets, unsigned* reach) {
  Block k;
  const int64_t rest = blockIdx.x / g.tiles();
  k.tile = tile_of(g, blockIdx.x % g.tiles());
  k.h = int(rest % heads);
  k.b = rest / heads;
  const int grp = heads == g.nh ? k.h / (g.nh / g.G) : k.h;
  if (offsets) tile_reach(g, k.tile, k.b, grp, offsets, reach);
  k.box = halo_box(g, k.tile, offsets ? reach : nullptr);
  return k;
}

// Calls f(query index in the tile, its coordinates, its token) for the warp's queries.
template <class F>
__device__ inline void for_each_query(const Geo& g, const Tile& t, F f) {
  for (int qi = int(threadIdx.x / 32); qi < g.queries(); qi += kTileWarps) {
    int c[3];
    if (t.query(g, qi, c)) f(qi, c, g.token(c));
  }
}

// Per chunk of channels, x's halo (head n) staged, then per query of the tile write(token, the lane's channel c,
// its pair of sum_p coefficient(query index, p) x~_p).
template <class C, class W>
__device__ inline void weighted_pass(const Geo& g, const Block& blk, const uint16_t* x, const uint16_t* offsets, int n,
                                     uint16_t* staged, SlotGeo* geo, C coefficient, W write) {
  const int grp = n / (g.nh / g.G);
  for (int c0 = 0; c0 < g.d; c0 += kChunk) {
    stage(g, blk.box, x, blk.b, n, c0, staged);
    const Source src{x, staged, blk.b, n, c0};
    for_each_query(g, blk.tile, [&](int qi, const int* qc, int64_t l) {
      float2 acc = make_float2(0.f, 0.f);
      for_each_slot(g, blk.box, qc, g.offsets_of(offsets, blk.b, l, grp), geo,
                    [&](const SlotGeo& sg) { axpy(coefficient(qi, sg.p), src.interpolate(g, sg), acc); });
      write(l, c0 + 2 * int(threadIdx.x % 32), acc);
    });
  }
}

// Block (b, n, tile): per chunk of channels, the K halo staged, then score[query, p] += q . k~ (the key
// interpolated from the slot's corners); the softmax per query; per chunk, the V halo staged, then
// out = sum_p a_p v~_p.
__global__ void __launch_bounds__(kTileWarps * 32)
    forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, uint16_t* out,
                   float* lse, Geo g) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  __shared__ unsigned reach[3];
  const int lane = int(threadIdx.x % 32), Q = g.queries();
  SlotGeo* geo = reinterpret_cast<SlotGeo*>(smem_bytes) + threadIdx.x / 32 * 32;  // the warp's [32]
  float* score = reinterpret_cast<float*>(smem_bytes + kGeoBytes);                // [Q, P]: scores, then probabilities
  uint16_t* staged = reinterpret_cast<uint16_t*>(smem_bytes + kGeoBytes + staged_offset(Q * g.P));  // [rows, kChunk]
  const Block blk = block_of(g, g.nh, offsets, reach);
  const int n = blk.h, grp = n / (g.nh / g.G);
  for (int i = int(threadIdx.x); i < Q * g.P; i += int(blockDim.x)) score[i] = 0;
  for (int c0 = 0; c0 < g.d; c0 += kChunk) {
    stage(g, blk.box, k, blk.b, n, c0, staged);
    const Source ks{k, staged, blk.b, n, c0};
    for_each_query(g, blk.tile, [&](int qi, const int* qc, int64_t l) {
      float2 qp = lane_pair(q + g.row(blk.b, l, n), g.d, c0 + 2 * lane);
      qp = make_float2(qp.x * g.scale, qp.y * g.scale);
      for_each_slot(g, blk.box, qc, g.offsets_of(offsets, blk.b, l, grp), geo, [&](const SlotGeo& sg) {
        const float s = pair_dot(qp, ks.interpolate(g, sg));
        if (lane == 0) score[qi * g.P + sg.p] += s;
      });
    });
  }
  __syncwarp();
  for_each_query(g, blk.tile, [&](int qi, const int*, int64_t l) {
    float* sq = score + qi * g.P;
    float m = -FLT_MAX, sum = 0;
    for (int u = lane; u < g.valid_slots(); u += 32) m = nan_max(m, sq[g.valid_slot(u)]);  // a NaN score propagates
    m = warp_max(m);
    for (int u = lane; u < g.valid_slots(); u += 32) sum += __expf(sq[g.valid_slot(u)] - m);
    sum = warp_sum(sum);
    for (int u = lane; u < g.valid_slots(); u += 32) sq[g.valid_slot(u)] = __expf(sq[g.valid_slot(u)] - m) / sum;
    if (lane == 0) lse[(blk.b * g.nh + n) * g.L + l] = m + logf(sum);
  });
  __syncwarp();
  weighted_pass(
      g, blk, v, offsets, n, staged, geo, [&](int qi, int p) { return score[qi * g.P + p]; },
      [&](int64_t l, int c, float2 acc) {
        uint16_t* o = out + g.row(blk.b, l, n);
        if (c < g.d) store(o, c, acc.x);
        if (c + 1 < g.d) store(o, c + 1, acc.y);
      });
}

// The per-(query, slot) sums of the backward's first pass, summed over the chunks: x . t~ for the row x (q or dout)
// and the interpolated row t~ (k or v), then x . dt~/dpos per axis (with position gradients).
constexpr int kDots = 8;  // q.k~, dout.v~, q.dk~/dpos [3], dout.dv~/dpos [3]

// dots[query, p, first], and [.., 2 + 3 first + i] for the derivatives (when deriv), += the chunk's products of the
// rows x with the slots' rows of src (staged).
__device__ inline void add_dots(const Geo& g, const Block& blk, const Source& src, const uint16_t* x,
                                const uint16_t* offsets, bool deriv, int first, SlotGeo* geo, float* dots) {
  const int lane = int(threadIdx.x % 32), n = src.n, grp = n / (g.nh / g.G);
  for_each_query(g, blk.tile, [&](int qi, const int* qc, int64_t l) {
    const float2 xp = lane_pair(x + g.row(blk.b, l, n), g.d, src.c0 + 2 * lane);
    for_each_slot(g, blk.box, qc, g.offsets_of(offsets, blk.b, l, grp), geo, [&](const SlotGeo& sg) {
      float* d = dots + (qi * g.P + sg.p) * kDots;
      if (!deriv) {
        const float s = pair_dot(xp, src.interpolate(g, sg));
        if (lane == 0) d[first] += s;
        return;
      }
      float2 tp = make_float2(0.f, 0.f), dp[3] = {};
      for (int c = 0; c < 8; ++c) {
        float dw[3];
        corner_weight(sg.f, sg.g, c, dw);
        const float2 r = src.pair(g, sg.row[c]);
        axpy(sg.w[c], r, tp);
        for (int i = 0; i < 3; ++i) axpy(dw[i], r, dp[i]);
      }
      const float s = pair_dot(xp, tp);
      if (lane == 0) d[first] += s;
      for (int i = 0; i < 3; ++i) {
        const float si = pair_dot(xp, dp[i]);
        if (lane == 0) d[2 + first * 3 + i] += si;
      }
    });
  });
}

// Phase 1, block (b, group, tile), the group's heads in head order: per head, dots over the K then the V halo
// (staged chunk by chunk); the probabilities a and score gradients ds, saved in coef [B, nh, L, P]; dq += sum_p ds
// k~_p over the K halo again. doffsets += the position gradients summed over the heads (null: none wanted).
__global__ void __launch_bounds__(kTileWarps * 32)
    query_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, const uint16_t* out,
                 const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* doffsets, float2* coef, Geo g) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  __shared__ unsigned reach[3];
  const int lane = int(threadIdx.x % 32), Q = g.queries(), hpg = g.nh / g.G;
  const bool deriv = doffsets != nullptr;
  SlotGeo* geo = reinterpret_cast<SlotGeo*>(smem_bytes) + threadIdx.x / 32 * 32;  // the warp's [32]
  float* dots = reinterpret_cast<float*>(smem_bytes + kGeoBytes);                 // [Q, P, kDots]
  float* dpos = dots + Q * g.P * kDots;                                           // [Q, P, 3] when deriv
  float* stat = dpos + (deriv ? Q * g.P * 3 : 0);                                 // [Q, 2]: dout . out, lse
  uint16_t* staged = reinterpret_cast<uint16_t*>(smem_bytes + kGeoBytes + staged_offset(stat + 2 * Q - dots));
  const Block blk = block_of(g, g.G, offsets, reach);
  const int grp = blk.h;
  for (int i = int(threadIdx.x); deriv && i < Q * g.P * 3; i += int(blockDim.x)) dpos[i] = 0;
  for (int n = grp * hpg; n < (grp + 1) * hpg; ++n) {
    __syncthreads();  // the previous head's dq pass is done with dots
    for (int i = int(threadIdx.x); i < Q * g.P * kDots; i += int(blockDim.x)) dots[i] = 0;
    for_each_query(g, blk.tile, [&](int qi, const int*, int64_t l) {
      const int64_t r = g.row(blk.b, l, n);
      float delta = 0;
      for (int c0 = 0; c0 < g.d; c0 += kChunk)
        delta += pair_dot(lane_pair(dout + r, g.d, c0 + 2 * lane), lane_pair(out + r, g.d, c0 + 2 * lane));
      if (lane == 0) {
        stat[qi * 2] = delta;
        stat[qi * 2 + 1] = lse[(blk.b * g.nh + n) * g.L + l];
      }
    });
    for (int c0 = 0; c0 < g.d; c0 += kChunk) {
      stage(g, blk.box, k, blk.b, n, c0, staged);
      add_dots(g, blk, Source{k, staged, blk.b, n, c0}, q, offsets, deriv, 0, geo, dots);
    }
    for (int c0 = 0; c0 < g.d; c0 += kChunk) {
      stage(g, blk.box, v, blk.b, n, c0, staged);
      add_dots(g, blk, Source{v, staged, blk.b, n, c0}, dout, offsets, deriv, 1, geo, dots);
    }
    __syncwarp();
    for_each_query(g, blk.tile, [&](int qi, const int*, int64_t l) {
      for (int u = lane; u < g.valid_slots(); u += 32) {
        const int p = g.valid_slot(u);
        float* d = dots + (qi * g.P + p) * kDots;
        const float a = __expf(g.scale * d[0] - stat[qi * 2 + 1]), ds = a * (d[1] - stat[qi * 2]) * g.scale;
        coef[((blk.b * g.nh + n) * g.L + l) * g.P + p] = make_float2(a, ds);
        for (int i = 0; deriv && i < 3; ++i) dpos[(qi * g.P + p) * 3 + i] += ds * d[2 + i] + a * d[5 + i];
        d[0] = ds;
      }
    });
    __syncwarp();
    weighted_pass(
        g, blk, k, offsets, n, staged, geo, [&](int qi, int p) { return dots[(qi * g.P + p) * kDots]; },
        [&](int64_t l, int c, float2 acc) { add_pair(dq + g.row(blk.b, l, n), g.d, c, acc); });
  }
  if (!deriv) return;
  __syncwarp();
  for_each_query(g, blk.tile, [&](int qi, const int*, int64_t l) {
    uint16_t* dof = doffsets + ((blk.b * g.L + l) * g.G + grp) * g.P * 3;  // [P, 3]
    for (int i = lane; i < g.P * 3; i += 32) store(dof, i, load(dof, i) + dpos[qi * g.P * 3 + i]);
  });
}

// reach[axis] = the largest |offset| along the axis (as float bits: for non-negative floats, and NaN above +inf,
// the unsigned order is the float order, so atomicMax is exact whatever the order).
__global__ void reach_kernel(const uint16_t* offsets, unsigned* reach, int64_t n) {
  unsigned m[3] = {};
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m[i % 3] = max(m[i % 3], __float_as_uint(fabsf(load(offsets, i))));
  for (int a = 0; a < 3; ++a) atomicMax(reach + a, m[a]);
}

// Phase 2, warp (b, n, j): dk_j, dv_j += the shares of every (query, slot) with corner j, from coef.
template <int CH>
__global__ void __launch_bounds__(kWarps * 32)
    key_kernel(const uint16_t* q, const uint16_t* offsets, const uint16_t* dout, const float2* coef,
               const unsigned* reach, uint16_t* dk, uint16_t* dv, Geo g) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= g.B * g.L * g.nh) return;
  // Keys fastest: a block's warps take neighbouring keys of one head, whose candidate queries (their q and dout rows,
  // offsets and coefficients) mostly coincide, so that the block's loads share the SM's L1.
  const int64_t j = warp % g.L, bn = warp / g.L, b = bn / g.nh;
  const int n = int(bn % g.nh), grp = n / (g.nh / g.G);
  int jc[3], R[3];
  g.coords(j, jc);
  for (int i = 0; i < 3; ++i) {  // the reach of an offset, whole tokens (the whole axis for NaN or huge offsets)
    const float r = reach ? __uint_as_float(reach[i]) : 0.f;
    R[i] = r <= float(g.ext[i]) ? int(ceilf(r)) : g.ext[i];
  }
  float gk[CH] = {}, gv[CH] = {};
  for (int jt = 0; jt < g.kc[0]; ++jt)
    for (int jh = 0; jh < g.kc[1]; ++jh)
      for (int jw = 0; jw < g.kc[2]; ++jw) {
        const int p = g.slot(jt, jh, jw), js[3] = {jt, jh, jw};
        // Queries whose slot p can have corner j with a non-zero weight: the position (within |offset| <= r of the
        // base s + j_axis, clamping moves it no further) must lie in (jc - 1, jc + 1), so the window start s is
        // within ceil(r) of jc - j_axis per axis. The start is monotone in the query coordinate: a box lo..hi.
        int lo[3], hi[3], count = 1;
        for (int i = 0; i < 3; ++i) {
          const int smax = g.ext[i] - g.kc[i], half = g.kc[i] / 2;
          const int s0 = max(jc[i] - js[i] - R[i], 0), s1 = min(jc[i] - js[i] + R[i], smax);
          lo[i] = s0 == 0 ? 0 : s0 + half;
          hi[i] = s1 == smax ? g.ext[i] - 1 : s1 + half;
          count *= s0 <= s1 ? hi[i] - lo[i] + 1 : 0;
        }
        for (int u0 = 0; u0 < count; u0 += 32) {
          const int u = u0 + lane;
          float w = 0;
          int64_t tok = 0;
          if (u < count) {
            const int nh_ = hi[1] - lo[1] + 1, nw = hi[2] - lo[2] + 1;
            const int qc[3] = {lo[0] + u / (nh_ * nw), lo[1] + u / nw % nh_, lo[2] + u % nw};
            tok = g.token(qc);
            const uint16_t* off = g.offsets_of(offsets, b, tok, grp);
            w = 1;
            for (int i = 0; i < 3; ++i) {
              const Axis a = axis_sample(g.start(qc[i], i) + js[i], off ? load(off, p * 3 + i) : 0.f, g.ext[i]);
              w *= (a.i0 == jc[i] ? 1.f - a.f : 0.f) + (a.i1 == jc[i] ? a.f : 0.f);
            }
          }
          for (unsigned hits = __ballot_sync(0xffffffffu, w != 0.f); hits; hits &= hits - 1) {
            const int src = __ffs(hits) - 1;
            const float wq = __shfl_sync(0xffffffffu, w, src);
            const int64_t tq = __shfl_sync(0xffffffffu, tok, src);
            const float2 cf = coef[((b * g.nh + n) * g.L + tq) * g.P + p];
            axpy_row(cf.y * wq, q + g.row(b, tq, n), g.d, gk);
            axpy_row(cf.x * wq, dout + g.row(b, tq, n), g.d, gv);
          }
        }
      }
  add_row(dk + g.row(b, j, n), g.d, gk);
  add_row(dv + g.row(b, j, n), g.d, gv);
}

// ---- The forward on tensor cores (issue 53's halo form) ----
// Trilinear sampling is linear: q . k~_p = sum_c w_pc (q . k_c) over the corners c of slot p, and out = sum_p a_p v~_p
// = sum_r A_r v_r over the rows r of the keys, A_r summing a_p w_pc over the corners at r. A block takes 64 queries
// of one head (a 1 x 8 x 8 tile where the grid allows) and the box of keys every corner of theirs can be (halo_box,
// unbounded), 64 box rows at a time: S = Q K_rows^T on tensor cores, each (query, slot) gathering its corners' scores
// from S; the softmax per query; then A for the 64 rows (each query's thread scattering its slots' corners onto its own
// row of A, in slot then corner order) and O += A V_rows on tensor cores. It multiplies every box row with every query
// (about 50 times the slots' arithmetic for a 3 x 3 x 3 window), but on tensor cores, and each sum runs in a fixed
// order.
constexpr int kHaloMaxSlots = 64;      // slots per window this kernel takes; more run the staged kernel
constexpr int kSld = tile::kRows + 4;  // the fp32 chunk's row stride

struct HaloSmem {
  tile::bf16 *q, *dout, *kv[2];  // [64, Dp + kPad]: queries, output gradients (backward), two stages of 64 box rows
  float *s, *score, *da, *dpos;  // [64, kSld] a chunk's products; [64, P] the slots' scores, probabilities or ds,
                                 // [64, P] da and [64, P, 3] the position gradients (backward)
  float* stat;                   // [64, 2]: dout . out and lse (backward)
  uintptr_t end;                 // where the carving ended: from 0, the bytes
};
__host__ __device__ inline HaloSmem halo_smem(uintptr_t at, int Dp, int P, bool backward) {
  tile::Carve c{at};
  const int64_t rows = int64_t(tile::kRows) * (Dp + tile::kPad), slots = int64_t(tile::kRows) * P;
  HaloSmem m{};
  m.q = c.take<tile::bf16>(rows);
  for (auto& kv : m.kv) kv = c.take<tile::bf16>(rows);
  m.s = c.take<float>(int64_t(tile::kRows) * kSld);
  m.score = c.take<float>(slots);
  if (backward) {
    m.dout = c.take<tile::bf16>(rows);
    m.da = c.take<float>(slots);
    m.dpos = c.take<float>(3 * slots);
    m.stat = c.take<float>(int64_t(tile::kRows) * 2);
  }
  m.end = c.at;
  return m;
}
// The bytes halo_smem carves.
inline size_t halo_smem_bytes(int Dp, int P, bool backward) { return halo_smem(0, Dp, P, backward).end; }

// f(box row, weight, the weight's derivatives per axis [3]) for the 8 corners of valid slot u of the query at
// coordinates qc (offsets off [P, 3], or null), in corner order; its slot index returned. The sums of sampled rows skip
// the corners of zero weight, as the CPU drops them; the position gradients take every corner. A corner outside the
// box (none, by halo_box) gives row -1.
template <class F>
__device__ inline int slot_corners(const Geo& g, const Box& box, const int* qc, const uint16_t* off, int u, F f) {
  const int j[3] = {u / (g.kc[1] * g.kc[2]), u / g.kc[2] % g.kc[1], u % g.kc[2]};
  const int p = g.slot(j[0], j[1], j[2]);
  Axis ax[3];
  float fr[3], gr[3];
  for (int i = 0; i < 3; ++i) {
    ax[i] = axis_sample(g.start(qc[i], i) + j[i], off ? load(off, p * 3 + i) : 0.f, g.ext[i]);
    fr[i] = ax[i].f;
    gr[i] = ax[i].g;
  }
  for (int c = 0; c < 8; ++c) {
    float dw[3];
    const float w = corner_weight(fr, gr, c, dw);
    int at[3];
    for (int i = 0; i < 3; ++i) at[i] = c >> (2 - i) & 1 ? ax[i].i1 : ax[i].i0;
    f(box.local(at), w, dw);
  }
  return p;
}

// A tensor-core block's rows of head n: its queries (the tile's, w fastest) and its box, as places in [B, L, nh, d].
struct HaloRows {
  const Geo& g;
  const Block& blk;
  const uint16_t* offsets;
  int n, grp;

  // Query qi of the tile, or -1 past the grid's end.
  __device__ int64_t query(int qi) const {
    int c[3];
    return qi < g.queries() && blk.tile.query(g, qi, c) ? g.row(blk.b, g.token(c), n) : -1;
  }
  // Row i of the box (raster order), or -1 past it.
  __device__ int64_t box_row(int i) const {
    const Box& x = blk.box;
    if (i >= x.rows()) return -1;
    int at[3];
    x.coords(i, at);
    return g.row(blk.b, g.token(at), n);
  }
};
struct QueryRows {  // tile::stage_rows' and write_rows' row_of: the tile's queries
  const HaloRows* h;
  __device__ int64_t operator()(int r) const { return h->query(r); }
};
struct BoxChunk {  // the box's rows c0 .. c0 + 63
  const HaloRows* h;
  int c0;
  __device__ int64_t operator()(int r) const { return h->box_row(c0 + r); }
};

// f(qi, its coordinates, its offsets [P, 3] or null) for the tile's queries, a query per thread.
template <class F>
__device__ void for_each_query(const HaloRows& h, F f) {
  for (int qi = int(threadIdx.x); qi < h.g.queries(); qi += int(blockDim.x)) {
    int qc[3];
    if (h.blk.tile.query(h.g, qi, qc)) f(qi, qc, h.g.offsets_of(h.offsets, h.blk.b, h.g.token(qc), h.grp));
  }
}
// f(qi, coordinates, offsets, valid slot u) for every (query, valid slot), each pair by the same thread in every call.
template <class F>
__device__ void for_each_pair(const HaloRows& h, F f) {
  const int nv = h.g.valid_slots();
  for (int i = int(threadIdx.x); i < h.g.queries() * nv; i += int(blockDim.x)) {
    int qc[3];
    if (h.blk.tile.query(h.g, i / nv, qc))
      f(i / nv, qc, h.g.offsets_of(h.offsets, h.blk.b, h.g.token(qc), h.grp), i % nv);
  }
}

// body(c0, the staged rows) for each 64 rows c0 .. of the box of x, staged by cp.async into kv[2] in turn (the next
// while the body works on this one); the block synchronised after each.
template <class F>
__device__ void over_box_chunks(const HaloRows& h, const uint16_t* x, tile::bf16* const* kv, int Dp, bool async,
                                F body) {
  const int chunks = (h.blk.box.rows() + tile::kRows - 1) / tile::kRows;
  tile::stage_rows(kv[0], x, h.g.d, Dp, async, BoxChunk{&h, 0});
  ptx::cp_async_commit();
  for (int ch = 0; ch < chunks; ++ch) {
    const int st = ch % 2, c0 = ch * tile::kRows;
    if (ch + 1 < chunks) tile::stage_rows(kv[1 - st], x, h.g.d, Dp, async, BoxChunk{&h, c0 + tile::kRows});
    tile::previous_stage_ready();
    body(c0, kv[st]);
    __syncthreads();  // the chunk read before its stage is overwritten
  }
}

// s [64, kSld] = this warp's rows of an mma result over 64 box rows.
__device__ inline void store_chunk(float* s, const float (&acc)[tile::kRows / 8][4], const tile::Lane& L) {
  for (int nt = 0; nt < tile::kRows / 8; ++nt)
    for (int e = 0; e < 4; ++e) s[(16 * L.w + L.g + 8 * (e / 2)) * kSld + 8 * nt + 2 * L.t + e % 2] = acc[nt][e];
}
// This warp's rows of s [64, kSld] as the A fragments of a product over the 64 box rows, rounded to bf16.
__device__ inline void chunk_a_fragments(uint32_t (&af)[tile::kRows / 16][4], const float* s, const tile::Lane& L) {
  for (int c = 0; c < tile::kRows / 16; ++c)
    for (int r = 0; r < 4; ++r) {  // rows g, g + 8; columns 2 t, 2 t + 8 of each 16
      const float* x = s + (16 * L.w + L.g + 8 * (r % 2)) * kSld + 16 * c + 2 * L.t + 8 * (r / 2);
      af[c][r] = ptx::pack_bf16(__float2bfloat16(x[0]), __float2bfloat16(x[1]));
    }
}
// s [64, kSld] = box rows c0 .. c0 + 63 of each query's sum of x(qi, u) w_pc over its valid slots u and their corners
// of nonzero weight: each query's own thread, in slot then corner order. Synchronises the block before and after.
template <class X>
__device__ void scatter_chunk(const HaloRows& h, float* s, int c0, X x) {
  for (int i = int(threadIdx.x); i < tile::kRows * kSld; i += int(blockDim.x)) s[i] = 0.f;
  __syncthreads();
  const int nv = h.g.valid_slots();
  for_each_query(h, [&](int qi, const int* qc, const uint16_t* off) {
    for (int u = 0; u < nv; ++u) {
      const float a = x(qi, u);
      slot_corners(h.g, h.blk.box, qc, off, u, [&](int r, float w, const float*) {
        if (w != 0.f && r >= c0 && r < c0 + tile::kRows) s[qi * kSld + r - c0] += a * w;
      });
    }
  });
  __syncthreads();
}

// For each 64 box rows of x: m.s = their products with the block's 64 staged rows `a` (S = A X^T), then
// gather(qi, coordinates, offsets, valid slot u, c0) for every (query, valid slot).
template <class F>
__device__ void over_products(const HaloRows& h, const HaloSmem& m, const tile::bf16* a, const uint16_t* x, int Dp,
                              bool async, const tile::Lane& L, F gather) {
  over_box_chunks(h, x, m.kv, Dp, async, [&](int c0, const tile::bf16* rows) {
    float sc[tile::kRows / 8][4];
    tile::scores(sc, a, rows, Dp, L);
    store_chunk(m.s, sc, L);
    __syncthreads();
    for_each_pair(h, [&](int qi, const int* qc, const uint16_t* off, int u) { gather(qi, qc, off, u, c0); });
  });
}

// m.score[qi, p] of valid slot u += its share of the products in m.s (box rows c0 ..): w_pc times the product at each
// corner of nonzero weight there; NaN for such a corner outside the box (never, by halo_box, but loud if it were).
__device__ inline void add_slot_share(const HaloRows& h, const HaloSmem& m, int qi, const int* qc, const uint16_t* off,
                                      int u, int c0) {
  float add = 0.f;
  const int p = slot_corners(h.g, h.blk.box, qc, off, u, [&](int r, float w, const float*) {
    if (r < 0 && w != 0.f) add = NAN;
    if (w != 0.f && r >= c0 && r < c0 + tile::kRows) add += w * m.s[qi * kSld + r - c0];
  });
  m.score[qi * h.g.P + p] += add;
}

// Block (b, n, tile of 64 queries): out and lse of its queries.
__global__ void __launch_bounds__(tile::kThreads)
    halo_forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, uint16_t* out,
                        float* lse, Geo g, int Dp) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  __shared__ unsigned reach[3];
  const HaloSmem m = halo_smem(uintptr_t(smem_bytes), Dp, g.P, false);
  const Block blk = block_of(g, g.nh, offsets, reach);
  const HaloRows h{g, blk, offsets, blk.h, blk.h / (g.nh / g.G)};
  const tile::Lane L = tile::lane_of();
  const bool async = tile::stageable(g.d, q, k, v);
  for (int i = int(threadIdx.x); i < tile::kRows * g.P; i += int(blockDim.x)) m.score[i] = 0.f;
  tile::stage_rows(m.q, q, g.d, Dp, async, QueryRows{&h});
  // Scores: per 64 box rows, S = Q K^T, then each (query, valid slot) adds its corners' shares.
  over_products(h, m, m.q, k, Dp, async, L, [&](int qi, const int* qc, const uint16_t* off, int u, int c0) {
    add_slot_share(h, m, qi, qc, off, u, c0);
  });
  // The softmax per query over its valid slots (a NaN score propagates), lse saved.
  const int nv = g.valid_slots();
  for_each_query(h, [&](int qi, const int* qc, const uint16_t*) {
    float* sq = m.score + qi * g.P;
    float mx = -FLT_MAX, sum = 0.f;
    for (int u = 0; u < nv; ++u) mx = nan_max(mx, sq[g.valid_slot(u)] * g.scale);
    for (int u = 0; u < nv; ++u) sum += __expf(sq[g.valid_slot(u)] * g.scale - mx);
    for (int u = 0; u < nv; ++u) sq[g.valid_slot(u)] = __expf(sq[g.valid_slot(u)] * g.scale - mx) / sum;
    lse[(blk.b * g.nh + h.n) * g.L + g.token(qc)] = mx + logf(sum);
  });
  // Output: per 64 box rows, A (each query's thread its own row) and O += A V.
  float o[tile::kMaxDp / 8][4] = {};
  over_box_chunks(h, v, m.kv, Dp, async, [&](int c0, const tile::bf16* rows) {
    scatter_chunk(h, m.s, c0, [&](int qi, int u) { return m.score[qi * g.P + g.valid_slot(u)]; });
    uint32_t af[tile::kRows / 16][4];
    chunk_a_fragments(af, m.s, L);
    tile::accumulate(o, af, rows, Dp, L);
  });
  tile::write_rows(out, o, {1.f, 1.f}, false, g.d, L, QueryRows{&h});
}

// The backward's query side on tensor cores, block (b, group, tile of 64 queries), the group's heads in head order,
// as query_kernel computes it: per head, S = Q K^T gathered into the slots' scores; DP = dOut V^T gathered into
// da_p = dout . v~_p, with the position gradients' a_p dout . dv~/dpos; a_p, ds_p = a_p (da_p - dout . out) scale
// saved in coef for key_kernel; then S again for the position gradients' ds_p q . dk~/dpos, and DS (ds_p w_pc
// scattered onto the box rows) for dq += DS K on tensor cores. doffsets += the position gradients summed over the
// heads. Every sum in a fixed order.
__global__ void __launch_bounds__(tile::kThreads)
    halo_query_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets,
                      const uint16_t* out, const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* doffsets,
                      float2* coef, Geo g, int Dp) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  __shared__ unsigned reach[3];
  const bool deriv = doffsets != nullptr;
  const HaloSmem m = halo_smem(uintptr_t(smem_bytes), Dp, g.P, true);
  const Block blk = block_of(g, g.G, offsets, reach);
  const int grp = blk.h, hpg = g.nh / g.G, nv = g.valid_slots();
  const tile::Lane L = tile::lane_of();
  const bool async = tile::stageable(g.d, q, k, v, dout);
  for (int i = int(threadIdx.x); deriv && i < tile::kRows * g.P * 3; i += int(blockDim.x)) m.dpos[i] = 0.f;
  for (int n = grp * hpg; n < (grp + 1) * hpg; ++n) {
    const HaloRows h{g, blk, offsets, n, grp};
    __syncthreads();  // the previous head's last pass is done with the tiles and the slots' sums
    for (int i = int(threadIdx.x); i < tile::kRows * g.P; i += int(blockDim.x)) m.score[i] = m.da[i] = 0.f;
    tile::stage_rows(m.q, q, g.d, Dp, async, QueryRows{&h});
    tile::stage_rows(m.dout, dout, g.d, Dp, async, QueryRows{&h});
    for_each_query(h, [&](int qi, const int* qc, const uint16_t*) {  // delta = dout . out, and lse
      const int64_t r = g.row(blk.b, g.token(qc), n);
      float delta = 0.f;
      for (int c = 0; c < g.d; ++c) delta += load(dout, r + c) * load(out, r + c);
      m.stat[2 * qi] = delta;
      m.stat[2 * qi + 1] = lse[(blk.b * g.nh + n) * g.L + g.token(qc)];
    });
    // The slots' scores.
    over_products(h, m, m.q, k, Dp, async, L, [&](int qi, const int* qc, const uint16_t* off, int u, int c0) {
      add_slot_share(h, m, qi, qc, off, u, c0);
    });
    // da_p, and the position gradients' a_p dout . dv~/dpos (a_p from the complete scores and lse).
    over_products(h, m, m.dout, v, Dp, async, L, [&](int qi, const int* qc, const uint16_t* off, int u, int c0) {
      const int p = g.valid_slot(u);
      const float a = __expf(g.scale * m.score[qi * g.P + p] - m.stat[2 * qi + 1]);
      float add = 0.f, dpos[3] = {};
      slot_corners(g, blk.box, qc, off, u, [&](int r, float w, const float* dw) {
        if (r < c0 || r >= c0 + tile::kRows) return;
        const float x = m.s[qi * kSld + r - c0];
        if (w != 0.f) add += w * x;
        for (int i = 0; i < 3; ++i) dpos[i] += dw[i] * x;
      });
      m.da[qi * g.P + p] += add;
      for (int i = 0; deriv && i < 3; ++i) m.dpos[(qi * g.P + p) * 3 + i] += a * dpos[i];
    });
    // a_p and ds_p: saved in coef; ds_p kept in place of the score.
    for_each_pair(h, [&](int qi, const int* qc, const uint16_t*, int u) {
      const int p = g.valid_slot(u);
      const float a = __expf(g.scale * m.score[qi * g.P + p] - m.stat[2 * qi + 1]),
                  ds = a * (m.da[qi * g.P + p] - m.stat[2 * qi]) * g.scale;
      coef[((blk.b * g.nh + n) * g.L + g.token(qc)) * g.P + p] = make_float2(a, ds);
      m.score[qi * g.P + p] = ds;
    });
    // The position gradients' ds_p q . dk~/dpos from S again, and dq += DS K.
    float dqa[tile::kMaxDp / 8][4] = {};
    over_box_chunks(h, k, m.kv, Dp, async, [&](int c0, const tile::bf16* rows) {
      if (deriv) {
        float sc[tile::kRows / 8][4];
        tile::scores(sc, m.q, rows, Dp, L);
        store_chunk(m.s, sc, L);
        __syncthreads();
        for_each_pair(h, [&](int qi, const int* qc, const uint16_t* off, int u) {
          const int p = g.valid_slot(u);
          float dpos[3] = {};
          slot_corners(g, blk.box, qc, off, u, [&](int r, float, const float* dw) {
            if (r < c0 || r >= c0 + tile::kRows) return;
            for (int i = 0; i < 3; ++i) dpos[i] += dw[i] * m.s[qi * kSld + r - c0];
          });
          for (int i = 0; i < 3; ++i) m.dpos[(qi * g.P + p) * 3 + i] += m.score[qi * g.P + p] * dpos[i];
        });
        __syncthreads();  // S read before DS takes its place
      }
      scatter_chunk(h, m.s, c0, [&](int qi, int u) { return m.score[qi * g.P + g.valid_slot(u)]; });
      uint32_t af[tile::kRows / 16][4];
      chunk_a_fragments(af, m.s, L);
      tile::accumulate(dqa, af, rows, Dp, L);
    });
    tile::write_rows(dq, dqa, {1.f, 1.f}, true, g.d, L, QueryRows{&h});
  }
  if (!deriv) return;
  __syncthreads();
  const HaloRows h{g, blk, offsets, grp * hpg, grp};
  for_each_query(h, [&](int qi, const int* qc, const uint16_t*) {
    uint16_t* dof = doffsets + ((blk.b * g.L + g.token(qc)) * g.G + grp) * g.P * 3;  // [P, 3]
    for (int i = 0; i < g.P * 3; ++i) store(dof, i, load(dof, i) + m.dpos[qi * g.P * 3 + i]);
  });
}

struct HaloKeySmem {
  tile::bf16 *q[2], *dout[2];  // [64, Dp + kPad]: two stages of 64 candidate queries' q and dout rows
  float *at, *dst;             // [64 keys, kSld]: A^T and DS^T of the chunk
  uintptr_t end;               // where the carving ended: from 0, the bytes
};
__host__ __device__ inline HaloKeySmem halo_key_smem(uintptr_t at, int Dp) {
  tile::Carve c{at};
  const int64_t rows = int64_t(tile::kRows) * (Dp + tile::kPad);
  HaloKeySmem m;
  for (int s = 0; s < 2; ++s) m.q[s] = c.take<tile::bf16>(rows), m.dout[s] = c.take<tile::bf16>(rows);
  m.at = c.take<float>(int64_t(tile::kRows) * kSld);
  m.dst = c.take<float>(int64_t(tile::kRows) * kSld);
  m.end = c.at;
  return m;
}
inline size_t halo_key_smem_bytes(int Dp) { return halo_key_smem(0, Dp).end; }

// The backward's key side on tensor cores, block (b, n, tile of 64 keys): dk += DS^T Q and dv += A^T dOut over the
// queries whose corners can be among the tile's keys (a box of queries: a slot's base s + j lies within the reach of
// its corners, and the window start s is monotone in the query), 64 at a time. For each, the query's own thread
// scatters its slots' coefficients (coef: a_p, ds_p) times the corner weights into its column of A^T and DS^T (the
// keys by the chunk's queries), so every sum runs in a fixed order; the products on mma.sync.
__global__ void __launch_bounds__(tile::kThreads)
    halo_key_kernel(const uint16_t* q, const uint16_t* offsets, const uint16_t* dout, const float2* coef,
                    const unsigned* reach, uint16_t* dk, uint16_t* dv, Geo g, int Dp) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  const HaloKeySmem m = halo_key_smem(uintptr_t(smem_bytes), Dp);
  float *at = m.at, *dst = m.dst;
  const int64_t t = blockIdx.x % g.tiles(), rest = blockIdx.x / g.tiles();
  Block blk{rest / g.nh, int(rest % g.nh), tile_of(g, t), {}};
  const int n = blk.h, grp = n / (g.nh / g.G);
  Box keys;  // the tile's keys as a box, for slot_corners' rows: the whole tile, rows in Tile::query's order
  for (int i = 0; i < 3; ++i) {
    keys.lo[i] = blk.tile.c0[i];
    keys.n[i] = g.tile[i];
    // Queries with a corner among the keys: their start s within [lo - ceil(r) - (k' - 1), hi + ceil(r)].
    const float r = reach ? __uint_as_float(reach[i]) : 0.f;
    const int R = r <= float(g.ext[i]) ? int(ceilf(r)) : g.ext[i], smax = g.ext[i] - g.kc[i], half = g.kc[i] / 2;
    const int s0 = max(keys.lo[i] - R - g.kc[i], 0), s1 = min(keys.lo[i] + blk.tile.n[i] - 1 + R, smax);
    const int lo = s0 == 0 ? 0 : s0 + half, hi = s1 == smax ? g.ext[i] - 1 : s1 + half;
    blk.box.lo[i] = lo;
    blk.box.n[i] = s0 <= s1 ? hi - lo + 1 : 0;
  }
  const HaloRows h{g, blk, offsets, n, grp};  // its box: the candidate queries
  const tile::Lane L = tile::lane_of();
  const bool async = tile::stageable(g.d, q, dout);
  const int chunks = (blk.box.rows() + tile::kRows - 1) / tile::kRows, nv = g.valid_slots();
  tile::bf16* const* qs = m.q;
  tile::bf16* const* ds = m.dout;
  float gk[tile::kMaxDp / 8][4] = {}, gv[tile::kMaxDp / 8][4] = {};
  if (chunks > 0) {
    tile::stage_rows(qs[0], q, g.d, Dp, async, BoxChunk{&h, 0});
    tile::stage_rows(ds[0], dout, g.d, Dp, async, BoxChunk{&h, 0});
    ptx::cp_async_commit();
  }
  for (int ch = 0; ch < chunks; ++ch) {
    const int st = ch % 2, c0 = ch * tile::kRows;
    if (ch + 1 < chunks) {
      tile::stage_rows(qs[1 - st], q, g.d, Dp, async, BoxChunk{&h, c0 + tile::kRows});
      tile::stage_rows(ds[1 - st], dout, g.d, Dp, async, BoxChunk{&h, c0 + tile::kRows});
    }
    tile::previous_stage_ready();
    for (int i = int(threadIdx.x); i < tile::kRows * kSld; i += int(blockDim.x)) at[i] = dst[i] = 0.f;
    __syncthreads();
    for (int j = int(threadIdx.x); j < tile::kRows; j += int(blockDim.x)) {  // column j: candidate query c0 + j
      const int i = c0 + j;
      if (i >= blk.box.rows()) continue;
      int qc[3];
      blk.box.coords(i, qc);
      const int64_t tok = g.token(qc);
      const uint16_t* off = g.offsets_of(offsets, blk.b, tok, grp);
      const float2* cf = coef + ((blk.b * g.nh + n) * g.L + tok) * g.P;
      for (int u = 0; u < nv; ++u) {
        const float2 c = cf[g.valid_slot(u)];
        slot_corners(g, keys, qc, off, u, [&](int r, float w, const float*) {
          if (w == 0.f || r < 0) return;
          at[r * kSld + j] += c.x * w;
          dst[r * kSld + j] += c.y * w;
        });
      }
    }
    __syncthreads();
    uint32_t af[tile::kRows / 16][4];
    chunk_a_fragments(af, dst, L);
    tile::accumulate(gk, af, qs[st], Dp, L);  // dk += ds^T q
    chunk_a_fragments(af, at, L);
    tile::accumulate(gv, af, ds[st], Dp, L);  // dv += a^T dout
    __syncthreads();                          // the chunk read before its stage is overwritten
  }
  // The tile's keys sit where the forward's tile of queries would.
  tile::write_rows(dk, gk, {1.f, 1.f}, true, g.d, L, QueryRows{&h});
  tile::write_rows(dv, gv, {1.f, 1.f}, true, g.d, L, QueryRows{&h});
}

Geo geometry(const VideoAttentionDims& d, const DsaArgs& a) {
  MS_CHECK(d.d > 0 && d.d <= kDsaMaxHeadDim, "cuda dsa: head dim ", d.d, " must be in 1..", kDsaMaxHeadDim);
  MS_CHECK(d.B > 0 && d.T > 0 && d.H > 0 && d.W > 0 && d.nh > 0, "cuda dsa: empty dims");
  MS_CHECK(a.groups > 0 && d.nh % a.groups == 0, "cuda dsa: ", d.nh, " heads are not divisible by ", a.groups,
           " offset groups");
  MS_CHECK(a.P() <= kDsaMaxSlots, "cuda dsa: ", a.P(), " slots per window; at most ", kDsaMaxSlots);
  Geo g{};
  const int64_t ext[3] = {d.T, d.H, d.W};
  for (int i = 0; i < 3; ++i) {
    MS_CHECK(a.window[size_t(i)] > 0, "cuda dsa: window entry ", i, " is ", a.window[size_t(i)]);
    MS_CHECK(ext[i] < (int64_t(1) << 20), "cuda dsa: grid extent ", ext[i], " is too large");
    g.ext[i] = int(ext[i]);
    g.win[i] = int(a.window[size_t(i)]);
    g.kc[i] = std::min(g.win[i], g.ext[i]);
  }
  MS_CHECK(d.L() < (int64_t(1) << 31), "cuda dsa: ", d.L(), " tokens per sample; at most 2^31 - 1");
  g.B = d.B;
  g.L = d.L();
  g.nh = int(d.nh);
  g.d = int(d.d);
  g.G = int(a.groups);
  g.P = int(a.P());
  g.scale = 1.f / sqrtf(float(d.d));
  return g;
}

unsigned warp_blocks(int64_t warps) {
  const int64_t b = (warps + kWarps - 1) / kWarps;
  MS_CHECK(b < (int64_t(1) << 31), "cuda dsa: ", warps, " warps are too many for one launch");
  return unsigned(b);
}

// Calls f(integral_constant<int, CH>) with the channels per lane for head dim d.
template <class F>
void with_channels(int d, F&& f) {
  if (d <= 32) return f(std::integral_constant<int, 1>{});
  if (d <= 64) return f(std::integral_constant<int, 2>{});
  if (d <= 128) return f(std::integral_constant<int, 4>{});
  return f(std::integral_constant<int, 8>{});
}

// The staged kernels' tiles: at most max_queries queries, fewer when their slot_floats floats per (query, slot)
// would pass kSlotBytes; 8 wide in w where the grid allows (a halo grows with the tile's extent plus the window and
// the reach on each axis, so a 4 x 8 tile's is half a 1 x 32 one's), then as tall in h as it can be, then wider;
// and the staged rows at most.
void set_tiles(Geo& g, int max_queries, int slot_floats, int64_t halo_rows) {
  MS_CHECK(halo_rows >= 0 && halo_rows <= kDsaMaxHaloRows, "cuda dsa: ", halo_rows, " staged rows; at most ",
           kDsaMaxHaloRows);
  int Q = max_queries;
  while (Q > 1 && size_t(Q) * size_t(g.P) * size_t(slot_floats) * sizeof(float) > kSlotBytes) Q /= 2;
  g.tile[2] = std::min({Q, 8, g.ext[2]});
  g.tile[1] = std::min(Q / g.tile[2], g.ext[1]);
  g.tile[2] = std::min(Q / g.tile[1], g.ext[2]);
  g.tile[0] = std::min(Q / (g.tile[1] * g.tile[2]), g.ext[0]);
  for (int i = 0; i < 3; ++i) g.ntile[i] = (g.ext[i] + g.tile[i] - 1) / g.tile[i];
  g.halo = int(halo_rows);
}

// The widest staging copy d and the staged tensors' alignment allow.
int copy_unit(int d, std::initializer_list<const uint16_t*> xs) {
  auto aligned = [&](uintptr_t a) {
    for (const uint16_t* x : xs)
      if (reinterpret_cast<uintptr_t>(x) % a) return false;
    return true;
  };
  return d % 8 == 0 && aligned(16) ? 8 : d % 2 == 0 && aligned(4) ? 2 : 1;
}

// The blocks of a staged launch: (batch, heads, tile); and its shared memory, floats then the staged chunk.
unsigned staged_blocks(const Geo& g, int64_t heads) {
  const int64_t b = g.B * heads * g.ntile[0] * g.ntile[1] * g.ntile[2];
  MS_CHECK(b < (int64_t(1) << 31), "cuda dsa: ", b, " blocks are too many for one launch");
  return unsigned(b);
}

template <class K>
size_t staged_smem(K kernel, const Geo& g, int64_t floats) {
  const size_t bytes = size_t(kGeoBytes + staged_offset(floats)) + size_t(g.halo) * kChunk * sizeof(uint16_t);
  MS_CHECK(bytes <= kMaxSharedBytes, "cuda dsa: a block would need ", bytes, " bytes of shared memory, more than the ",
           kMaxSharedBytes, " of an sm_90 block; use fewer staged rows");
  if (bytes > 48 * 1024)
    MS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  return bytes;
}

// The head dim padded to the tensor-core tiles' 16 channels.
int padded_dim(const Geo& g) { return (g.d + 15) / 16 * 16; }

// Whether the tensor-core kernels run this launch's DSA (its choice, head dims up to 128, up to 64 slots); where they
// were asked for and cannot, one log line says why.
bool on_tensor_cores(const Launch& l, const Geo& g) {
  if (!l.dsa_tensor_cores) return false;
  if (g.d <= tile::kMaxDp && g.P <= kHaloMaxSlots) return true;
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    log_info("cuda dsa: the staged kernels run, not the tensor-core ones, for head dim ", g.d, " and ", g.P,
             " slots (those take head dims up to ", tile::kMaxDp, " and up to ", kHaloMaxSlots, " slots)");
  return false;
}

// The tensor-core kernels' geometry: tiles of up to 64 queries, and the box every corner can be, however large (it is
// taken 64 rows at a time). Their dynamic shared memory, smem bytes, set for `kernel` and returned.
template <class K>
size_t halo_launch(Geo& g, K kernel, size_t smem) {
  set_tiles(g, tile::kRows, 1, 0);
  g.halo = INT_MAX;
  MS_CHECK(smem <= kMaxSharedBytes, "cuda dsa: ", smem, " bytes of shared memory for the tensor-core kernels");
  MS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  return smem;
}

}  // namespace

void dsa_forward(const DsaParams<uint16_t, float>& p, const Launch& l) {
  Geo g = geometry(p.dims, p.args);
  if (on_tensor_cores(l, g)) {
    const size_t smem = halo_launch(g, halo_forward_kernel, halo_smem_bytes(padded_dim(g), g.P, false));
    halo_forward_kernel<<<staged_blocks(g, g.nh), tile::kThreads, smem, l.stream>>>(p.t.q, p.t.k, p.t.v, p.offsets,
                                                                                    p.t.out, p.t.lse, g, padded_dim(g));
    MS_CUDA_CHECK_LAUNCH();
    return;
  }
  set_tiles(g, kTileQueries, 1, l.dsa_halo_rows);
  g.unit = copy_unit(g.d, {p.t.k, p.t.v});
  const int Q = g.tile[0] * g.tile[1] * g.tile[2];
  const size_t smem = staged_smem(forward_kernel, g, int64_t(Q) * g.P);
  forward_kernel<<<staged_blocks(g, g.nh), kTileWarps * 32, smem, l.stream>>>(p.t.q, p.t.k, p.t.v, p.offsets, p.t.out,
                                                                              p.t.lse, g);
  MS_CUDA_CHECK_LAUNCH();
}

void dsa_backward(const DsaParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *q = p.t.q, *k = p.t.k, *v = p.t.v, *offsets = p.offsets, *out = p.t.out, *dout = p.t.dout;
  const float* lse = p.t.lse;
  uint16_t *dq = p.t.dq, *dk = p.t.dk, *dv = p.t.dv;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(dsa_backward_scratch(p.dims, p.args));
  Geo g = geometry(p.dims, p.args);
  unsigned* reach = offsets ? reinterpret_cast<unsigned*>(scratch) : nullptr;  // [3], then 1 float of padding
  float2* coef = reinterpret_cast<float2*>(scratch + 4);                       // [B, nh, L, P]
  if (reach) {
    MS_CUDA_CHECK(cudaMemsetAsync(reach, 0, 3 * sizeof(unsigned), stream));
    const int64_t n = g.B * g.L * g.G * g.P * 3;
    reach_kernel<<<std::min(elementwise_blocks(n), 1024u), 256, 0, stream>>>(offsets, reach, n);
    MS_CUDA_CHECK_LAUNCH();
  }
  uint16_t* dof = offsets ? p.doffsets : nullptr;
  if (on_tensor_cores(l, g)) {
    Geo h = g;
    const int Dp = padded_dim(h);
    size_t smem = halo_launch(h, halo_query_kernel, halo_smem_bytes(Dp, h.P, true));
    halo_query_kernel<<<staged_blocks(h, h.G), tile::kThreads, smem, stream>>>(q, k, v, offsets, out, lse, dout, dq,
                                                                               dof, coef, h, Dp);
    MS_CUDA_CHECK_LAUNCH();
    smem = halo_launch(h, halo_key_kernel, halo_key_smem_bytes(Dp));
    halo_key_kernel<<<staged_blocks(h, h.nh), tile::kThreads, smem, stream>>>(q, offsets, dout, coef, reach, dk, dv, h,
                                                                              Dp);
    MS_CUDA_CHECK_LAUNCH();
    return;
  }
  {
    Geo h = g;
    const int slot_floats = kDots + (dof ? 3 : 0);
    set_tiles(h, kTileQueries, slot_floats, l.dsa_halo_rows);
    h.unit = copy_unit(h.d, {k, v});
    const int Q = h.tile[0] * h.tile[1] * h.tile[2];
    const size_t smem = staged_smem(query_kernel, h, int64_t(Q) * (h.P * slot_floats + 2));
    query_kernel<<<staged_blocks(h, h.G), kTileWarps * 32, smem, stream>>>(q, k, v, offsets, out, lse, dout, dq, dof,
                                                                           coef, h);
  }
  MS_CUDA_CHECK_LAUNCH();
  with_channels(g.d, [&](auto ch) {
    key_kernel<decltype(ch)::value>
        <<<warp_blocks(g.B * g.L * g.nh), kWarps * 32, 0, stream>>>(q, offsets, dout, coef, reach, dk, dv, g);
    MS_CUDA_CHECK_LAUNCH();
  });
}

namespace {

__global__ void offsets_forward_kernel(const uint16_t* raw, uint16_t* offsets, float3 range, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float r = i % 3 == 0 ? range.x : i % 3 == 1 ? range.y : range.z;
    store(offsets, i, r * tanhf(load(raw, i)));
  }
}

__global__ void offsets_backward_kernel(const uint16_t* raw, const uint16_t* doffsets, uint16_t* draw, float3 range,
                                        int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float r = i % 3 == 0 ? range.x : i % 3 == 1 ? range.y : range.z, t = tanhf(load(raw, i));
    store(draw, i, load(doffsets, i) * r * (1.f - t * t));
  }
}

float3 range3(const std::array<double, 3>& r) { return make_float3(float(r[0]), float(r[1]), float(r[2])); }

}  // namespace

void dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p, const Launch& l) {
  const int64_t n = p.N * p.M * 3;
  if (n == 0) return;
  offsets_forward_kernel<<<elementwise_blocks(n), 256, 0, l.stream>>>(p.raw, p.offsets, range3(p.range), n);
  MS_CUDA_CHECK_LAUNCH();
}

void dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p, const Launch& l) {
  const int64_t n = p.N * p.M * 3;
  if (n == 0) return;
  offsets_backward_kernel<<<elementwise_blocks(n), 256, 0, l.stream>>>(p.raw, p.doffsets, p.draw, range3(p.range), n);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
