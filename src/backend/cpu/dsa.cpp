// The DSA kernels (ops/dsa.h), compiled for every SIMD target by Highway's foreach_target and picked at run time
// (HWY_DYNAMIC_DISPATCH): the sampling geometry and the head-dim rows of the common head dims are Highway vectors,
// the rest plain C++, which the compiler vectorises for each target. The results are
// deterministic for a given machine; targets differ in the last bits (FMA contraction, vector widths). AVX-512 is
// left out, as it was no faster than AVX2 (docs/benchmarks.md); so are the scalable-vector targets (SVE, RVV), whose
// sizeless vectors cannot be held in the arrays the geometry uses; their machines run NEON or the portable targets.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_AVX3 | HWY_AVX3_DL | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128 | HWY_RVV)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backend/cpu/dsa.cpp"
#include "ops/dsa.h"

#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/vector_map-inl.h"  // per target, included again like this file
#include "core/check.h"
#include "core/parallel.h"

HWY_BEFORE_NAMESPACE();
namespace ms::cpu::HWY_NAMESPACE {
namespace {

constexpr int64_t kTileQ = 16;              // queries per task (forward, backward phase 1)
constexpr int64_t kBlock[3] = {4, 8, 8};    // query order: the blocks (t, h, w) the grid is walked in
constexpr int64_t kScratchBytes = 4 << 20;  // backward: corner tokens and coefficients of one pass of queries

// Calls f(d) with the head dim as a compile-time constant for the common sizes, so that the per-corner loops
// over it unroll and reduce without a remainder, and as a run-time value otherwise.
template <class F>
void with_head_dim(int64_t d, F&& f) {
  switch (d) {
    case 32:
      return f(std::integral_constant<int64_t, 32>{});
    case 64:
      return f(std::integral_constant<int64_t, 64>{});
    case 128:
      return f(std::integral_constant<int64_t, 128>{});
    default:
      return f(d);
  }
}

namespace hn = hwy::HWY_NAMESPACE;

// A head-dim row of the per-(query, head) work: the query's q and dout rows, a sample's interpolated key, an output
// or gradient being summed. For a run-time head dim it lives in a row of the task's scratch and the loops are plain
// C++; for the compile-time head dims of with_head_dim it is held in Highway vectors, so that those rows stay in
// registers across the corner and token loops (GCC's vectoriser kept them in memory, or fell back to scalar code).
template <class T, class D, class = void>
struct Row {
  T* r;  // [d] the scratch row
  int64_t d;
  Row(D dim, T* scratch) : r(scratch), d(dim) {}
  void load(const T* p) { std::copy(p, p + d, r); }
  void zero() { std::fill(r, r + d, T(0)); }
  void set_scaled(T a, const T* p) {  // r = a p
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) r[i] = a * p[i];
  }
  void axpy(T a, const T* p) {  // r += a p
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) r[i] += a * p[i];
  }
  T dot(const T* p) const {
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < d; ++i) s += r[i] * p[i];
    return s;
  }
  T dot(const Row& o) const { return dot(o.r); }
  void axpy_to(T a, T* p) const {  // p += a r
#pragma omp simd
    for (int64_t i = 0; i < d; ++i) p[i] += a * r[i];
  }
  void add_to(T* p) const { axpy_to(T(1), p); }
  void store(T* p) const { std::copy(r, r + d, p); }
};

template <class T, int64_t D>
struct Row<T, std::integral_constant<int64_t, D>, std::enable_if_t<D % hn::MaxLanes(hn::ScalableTag<T>()) == 0>> {
  using Tag = hn::ScalableTag<T>;
  static constexpr size_t N = hn::MaxLanes(Tag()), V = size_t(D) / N;
  hn::Vec<Tag> r[V];
  Row(std::integral_constant<int64_t, D>, T*) {}
  HWY_INLINE void load(const T* p) {
    for (size_t i = 0; i < V; ++i) r[i] = hn::LoadU(Tag(), p + i * N);
  }
  HWY_INLINE void zero() {
    for (size_t i = 0; i < V; ++i) r[i] = hn::Zero(Tag());
  }
  HWY_INLINE void set_scaled(T a, const T* p) {
    const auto av = hn::Set(Tag(), a);
    for (size_t i = 0; i < V; ++i) r[i] = hn::Mul(av, hn::LoadU(Tag(), p + i * N));
  }
  HWY_INLINE void axpy(T a, const T* p) {
    const auto av = hn::Set(Tag(), a);
    for (size_t i = 0; i < V; ++i) r[i] = hn::MulAdd(av, hn::LoadU(Tag(), p + i * N), r[i]);
  }
  HWY_INLINE T dot(const T* p) const {  // two partial sums: half the add-latency chain
    auto s0 = hn::Mul(r[0], hn::LoadU(Tag(), p)), s1 = hn::Zero(Tag());
    for (size_t i = 1; i < V; ++i) (i % 2 ? s1 : s0) = hn::MulAdd(r[i], hn::LoadU(Tag(), p + i * N), i % 2 ? s1 : s0);
    return hn::GetLane(hn::SumOfLanes(Tag(), hn::Add(s0, s1)));
  }
  HWY_INLINE T dot(const Row& o) const {
    auto s0 = hn::Mul(r[0], o.r[0]), s1 = hn::Zero(Tag());
    for (size_t i = 1; i < V; ++i) (i % 2 ? s1 : s0) = hn::MulAdd(r[i], o.r[i], i % 2 ? s1 : s0);
    return hn::GetLane(hn::SumOfLanes(Tag(), hn::Add(s0, s1)));
  }
  HWY_INLINE void axpy_to(T a, T* p) const {
    const auto av = hn::Set(Tag(), a);
    for (size_t i = 0; i < V; ++i) hn::StoreU(hn::MulAdd(av, r[i], hn::LoadU(Tag(), p + i * N)), Tag(), p + i * N);
  }
  HWY_INLINE void add_to(T* p) const {
    for (size_t i = 0; i < V; ++i) hn::StoreU(hn::Add(r[i], hn::LoadU(Tag(), p + i * N)), Tag(), p + i * N);
  }
  HWY_INLINE void store(T* p) const {
    for (size_t i = 0; i < V; ++i) hn::StoreU(r[i], Tag(), p + i * N);
  }
};

// The samples of one (query, group) are computed with Highway vectors over the slots: sample j's value for corner c
// (c = (ct * 2 + ch) * 2 + cw, 0 the lower corner on every axis) lives at [c * nvp + j], nvp = padded(nv), nv
// rounded up to kLanes. The lanes past nv repeat sample 0 (its slot and offsets), so they never widen the corners' box.
constexpr int64_t kLanes = 16;  // a multiple of every target's lane count (AVX-512 float: 16)
constexpr int64_t padded(int64_t nv) { return (nv + kLanes - 1) / kLanes * kLanes; }

// How many distinct tokens and grid-row runs of them Geometry::number found.
struct Numbered {
  int32_t u, runs;
};

// Per-task scratch of one (query, group)'s samples.
template <class T>
struct QueryScratch {
  int64_t nvp;                  // nv rounded up to kLanes
  std::vector<T> jax;           // [3, nvp] per axis the samples' slot index j (Geometry::slots), as T
  std::vector<T> off, f, g;     // [3, nvp] per axis: offset (zero as constructed, for zero offsets), weight of the
                                // upper corner, d pos / d offset (0 or 1)
  std::vector<int32_t> at;      // [3, 2, nvp] per axis the lower and upper corner's index
  std::vector<int32_t> tok;     // [8, nvp] corner token index in the grid (samples_box: its place in the box);
                                // after Geometry::number, its distinct token number
  std::vector<T> w;             // [8, nvp] interpolation weight
  std::vector<T> dw;            // [8, 3, nvp] d w / d offset per axis (samples_box; zero on clamped axes)
  int64_t lo[3], hi[3], wpr;    // the box of the corners per axis; 64-bit words per box row (t, h) in seen
  std::vector<uint64_t> seen;   // [box rows, wpr] the corners present, a bit per w
  std::vector<int32_t> number;  // [box rows, 64 wpr] the distinct token number per place
  std::vector<T> prob;          // [nvp] per sample: scores, then probabilities ([0, nv) used)
  std::vector<T> dp;            // [nvp] per sample: d loss / d probability (backward)
  std::vector<T> rows;          // [4, d] Row scratch for a run-time head dim
  std::vector<T> qk, dov;       // [8 nv] per distinct token: q.k, dout.v (backward)
  QueryScratch(const std::vector<int32_t>& slots, int64_t nv, int64_t d)
      : nvp(padded(nv)),
        jax(size_t(3 * nvp)),
        off(size_t(3 * nvp)),
        f(size_t(3 * nvp)),
        g(size_t(3 * nvp)),
        at(size_t(6 * nvp)),
        tok(size_t(8 * nvp)),
        w(size_t(8 * nvp)),
        dw(size_t(24 * nvp)),
        prob(size_t(nvp)),
        dp(size_t(nvp)),
        rows(size_t(4 * d)),
        qk(size_t(8 * nv)),
        dov(size_t(8 * nv)) {
    for (int64_t i = 0; i < 3 * nvp; ++i) jax[size_t(i)] = T(slots[size_t(i)]);
  }
};

// The fixed part of the geometry: extents, window sizes and clipped window sizes k' = min(k, E), and the valid slots.
struct Geometry {
  int64_t ext[3], win[3], kc[3];
  std::vector<int32_t> slots;  // [4, nvp] per valid sample j in t-major order: jt, jh, jw, its slot p
  Geometry(const VideoAttentionDims& d, const DsaArgs& a) : ext{d.T, d.H, d.W} {
    MS_CHECK(d.L() <= std::numeric_limits<int32_t>::max(), "dsa: ", d.L(), " tokens per sample do not fit int32");
    for (int i = 0; i < 3; ++i) {
      MS_CHECK(a.window[size_t(i)] > 0, "dsa: window entry ", i, " is ", a.window[size_t(i)]);
      win[i] = a.window[size_t(i)];
      kc[i] = std::min(win[i], ext[i]);
    }
    const int64_t nv = valid(), nvp = padded(nv);
    slots.resize(size_t(4 * nvp));
    for (int64_t j = 0; j < nvp; ++j) {
      const int64_t s = j < nv ? j : 0, jt = s / (kc[1] * kc[2]), jh = s / kc[2] % kc[1], jw = s % kc[2];
      const int64_t v[4] = {jt, jh, jw, (jt * win[1] + jh) * win[2] + jw};
      for (int r = 0; r < 4; ++r) slots[size_t(r * nvp + j)] = int32_t(v[r]);
    }
  }

  int64_t valid() const { return kc[0] * kc[1] * kc[2]; }  // valid slots per query, nv
  int32_t slot(int64_t j, int64_t nvp) const { return slots[size_t(3 * nvp + j)]; }

  // Query order: the grid is cut into blocks of kBlock tokens (t, h, w; smaller at the far ends), walked in raster
  // order, (t, h, w) inside each, so that the K/V rows which a pass of queries reaches (the block plus the halo)
  // stay in cache however large the video. Returns the token of the m-th query, m in [0, L).
  int64_t query(int64_t m) const {
    int64_t start[3], size[3];
    for (int i = 0; i < 3; ++i) {  // m's block along axis i, then m within that slab
      // queries per unit of axis i in the current slab: the blocks found so far times the axes not yet cut
      const int64_t inner = i == 0 ? ext[1] * ext[2] : i == 1 ? size[0] * ext[2] : size[0] * size[1];
      const int64_t bs = std::min(kBlock[i], ext[i]), block = std::min(m / (bs * inner), ext[i] / bs);
      start[i] = block * bs;
      size[i] = std::min(bs, ext[i] - start[i]);
      m -= start[i] * inner;
    }
    return ((start[0] + m / (size[1] * size[2])) * ext[1] + start[1] + m / size[2] % size[1]) * ext[2] + start[2] +
           m % size[2];
  }

  // The forward's and the window's samples of query token `tok`: qs.tok gets each corner's grid token, qs.w its
  // weight. off [P, 3] holds the query's offsets for its group, or is null for zero offsets, where every sample is its
  // lower corner, of weight 1, and only that corner is filled. A corner of zero weight (the upper one on an axis at an
  // integer position) adds exact zeros, so the corner loops have a constant trip count.
  template <class T>
  void samples(int64_t tok, const T* off, QueryScratch<T>& qs) const {
    axes(tok, off, qs);
    using DT = hn::ScalableTag<T>;
    const DT dt;
    const hn::Rebind<int32_t, DT> di;
    const int64_t nvp = qs.nvp, N = int64_t(hn::Lanes(dt)), corners = off ? 8 : 1;
    const auto sh = hn::Set(di, int32_t(ext[1])), sw = hn::Set(di, int32_t(ext[2]));
    for (int64_t c = 0; c < corners; ++c) {
      const int64_t cs[3] = {c >> 2, c >> 1 & 1, c & 1};
      for (int64_t j = 0; j < nvp; j += N) {
        const auto t = at_lanes(qs, di, 0, cs[0], j), h = at_lanes(qs, di, 1, cs[1], j),
                   w = at_lanes(qs, di, 2, cs[2], j);
        hn::StoreU(hn::Add(hn::Mul(hn::Add(hn::Mul(t, sh), h), sw), w), di, &qs.tok[size_t(c * nvp + j)]);
        hn::Vec<DT> wa[3], da[3];
        corner_axes(qs, dt, cs, j, wa, da);
        hn::StoreU(hn::Mul(hn::Mul(wa[0], wa[1]), wa[2]), dt, &qs.w[size_t(c * nvp + j)]);
      }
    }
  }

  // The backward's samples (the window's aside): every sample has its 8 corners, with their weight derivatives in
  // qs.dw, and the corners' box (qs.lo, qs.hi), their places in it (in qs.tok) and their bits in qs.seen are filled
  // for number. A corner of zero weight and zero derivative (the upper one on an axis clamped at an integer position)
  // adds exact zeros: the sums are those without it, and the code has no branches.
  template <class T>
  void samples_box(int64_t tok, const T* off, QueryScratch<T>& qs) const {
    axes(tok, off, qs);
    using DT = hn::ScalableTag<T>;
    const DT dt;
    const hn::Rebind<int32_t, DT> di;
    const int64_t nvp = qs.nvp, N = int64_t(hn::Lanes(dt));
    for (int i = 0; i < 3; ++i) {  // the box: the lanes past nv repeat sample 0
      auto lo = hn::LoadU(di, &qs.at[size_t(2 * i * nvp)]), hi = hn::LoadU(di, &qs.at[size_t((2 * i + 1) * nvp)]);
      for (int64_t j = N; j < nvp; j += N) {
        lo = hn::Min(lo, at_lanes(qs, di, i, 0, j));
        hi = hn::Max(hi, at_lanes(qs, di, i, 1, j));
      }
      qs.lo[i] = hn::GetLane(hn::MinOfLanes(di, lo));
      qs.hi[i] = hn::GetLane(hn::MaxOfLanes(di, hi));
    }
    // Box rows are 64 wpr places wide, so that a place's word and bit in seen are a shift and a mask.
    const int64_t bh = qs.hi[1] - qs.lo[1] + 1;
    qs.wpr = (qs.hi[2] - qs.lo[2] + 64) / 64;
    const auto sh = hn::Set(di, int32_t(bh)), sw = hn::Set(di, int32_t(64 * qs.wpr));
    const hn::Vec<decltype(di)> lo[3] = {hn::Set(di, int32_t(qs.lo[0])), hn::Set(di, int32_t(qs.lo[1])),
                                         hn::Set(di, int32_t(qs.lo[2]))};
    for (int64_t c = 0; c < 8; ++c) {
      const int64_t cs[3] = {c >> 2, c >> 1 & 1, c & 1};
      for (int64_t j = 0; j < nvp; j += N) {
        hn::Vec<decltype(di)> a[3];  // per axis the corner's index in the box
        for (int i = 0; i < 3; ++i) a[i] = hn::Sub(at_lanes(qs, di, i, cs[i], j), lo[i]);
        hn::Vec<DT> wa[3], da[3];
        corner_axes(qs, dt, cs, j, wa, da);
        hn::StoreU(hn::Add(hn::Mul(hn::Add(hn::Mul(a[0], sh), a[1]), sw), a[2]), di, &qs.tok[size_t(c * nvp + j)]);
        const auto w01 = hn::Mul(wa[0], wa[1]);
        hn::StoreU(hn::Mul(w01, wa[2]), dt, &qs.w[size_t(c * nvp + j)]);
        T* dw = &qs.dw[size_t(c * 3 * nvp + j)];  // [3, nvp]
        hn::StoreU(hn::Mul(hn::Mul(da[0], wa[1]), wa[2]), dt, dw);
        hn::StoreU(hn::Mul(hn::Mul(wa[0], da[1]), wa[2]), dt, dw + nvp);
        hn::StoreU(hn::Mul(w01, da[2]), dt, dw + 2 * nvp);
      }
    }
    qs.seen.assign(size_t((qs.hi[0] - qs.lo[0] + 1) * bh * qs.wpr), 0);
    const int64_t nv = valid();
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t j = 0; j < nv; ++j) {
        const int32_t place = qs.tok[size_t(c * nvp + j)];
        qs.seen[size_t(place >> 6)] |= uint64_t(1) << (place & 63);
      }
  }

  // Numbers the distinct corner tokens of qs's samples in grid order: toks[0..u) gets them, each corner's tok its
  // number, runs [runs, 2] the (first number, grid row t * H + h) of each run of tokens in one grid row. A token shared
  // by several corners (about 100 of the 216 corners for window 3 and offsets up to [1, 2, 2]) is then read and updated
  // once per head. Grid order does not depend on which corners of zero weight are kept (they are for the position
  // gradient), so the sums over tokens do not either.
  template <class T>
  Numbered number(QueryScratch<T>& qs, int64_t nv, int32_t* toks, int32_t* runs) const {
    const int64_t bt = qs.hi[0] - qs.lo[0] + 1, bh = qs.hi[1] - qs.lo[1] + 1, places = bt * bh * qs.wpr * 64;
    if (qs.number.size() < size_t(places)) qs.number.resize(size_t(places));
    const uint64_t* seen = qs.seen.data();  // [bt * bh, wpr]
    int32_t* number = qs.number.data();     // [bt * bh, 64 wpr]
    Numbered nb{0, 0};
    for (int64_t bt_i = 0, r = 0; bt_i < bt; ++bt_i)
      for (int64_t bh_i = 0; bh_i < bh; ++bh_i, ++r) {
        const int64_t grid_row = (qs.lo[0] + bt_i) * ext[1] + qs.lo[1] + bh_i, first = grid_row * ext[2] + qs.lo[2];
        const int32_t start = nb.u;
        for (int64_t e = 0; e < qs.wpr; ++e)
          for (uint64_t bits = seen[r * qs.wpr + e]; bits; bits &= bits - 1) {
            const int64_t w = e * 64 + __builtin_ctzll(bits);
            number[r * qs.wpr * 64 + w] = nb.u;
            toks[nb.u++] = int32_t(first + w);
          }
        if (nb.u == start) continue;  // no corner in this row
        runs[2 * nb.runs] = start;
        runs[2 * nb.runs++ + 1] = int32_t(grid_row);
      }
    for (int64_t c = 0; c < 8; ++c)
      for (int64_t j = 0; j < nv; ++j) qs.tok[size_t(c * qs.nvp + j)] = number[qs.tok[size_t(c * qs.nvp + j)]];
    return nb;
  }

  // number for zero offsets without position gradients: each sample is one token of the window, distinct, and
  // the slots' t-major order is grid order.
  template <class T>
  Numbered number_window(QueryScratch<T>& qs, int64_t nv, int32_t* toks, int32_t* runs) const {
    Numbered nb{int32_t(nv), 0};
    for (int32_t j = 0; j < nb.u; ++j) {
      toks[j] = qs.tok[size_t(j)];
      qs.tok[size_t(j)] = j;
      if (j % kc[2]) continue;
      runs[2 * nb.runs] = j;
      runs[2 * nb.runs++ + 1] = int32_t(toks[j] / ext[2]);
    }
    return nb;
  }

 private:
  // The window starts of query token `tok` per axis.
  void starts(int64_t tok, int64_t* start) const {
    const int64_t idx[3] = {tok / (ext[1] * ext[2]), (tok / ext[2]) % ext[1], tok % ext[2]};
    for (int i = 0; i < 3; ++i) start[i] = std::clamp(idx[i] - kc[i] / 2, int64_t(0), ext[i] - kc[i]);
  }

  // Per axis, the linear interpolation at pos = clamp(s + j + offset, 0, E - 1) of every sample of query token `tok`:
  // qs.at its corners floor(pos) and min(floor(pos) + 1, E - 1), qs.f the upper corner's weight (the lower one has
  // 1 - f), qs.g d pos / d offset: 1 strictly inside (0, E - 1), 0 where clamped. A NaN offset reads corner 0 with
  // NaN weights: it propagates, never out of bounds.
  template <class T>
  void axes(int64_t tok, const T* off, QueryScratch<T>& qs) const {
    int64_t start[3];
    starts(tok, start);
    const int64_t nvp = qs.nvp;
    for (int64_t j = 0; off && j < nvp; ++j)
      for (int i = 0; i < 3; ++i) qs.off[size_t(i * nvp + j)] = off[slot(j, nvp) * 3 + i];
    using DT = hn::ScalableTag<T>;
    const DT dt;
    const hn::Rebind<int32_t, DT> di;
    const int64_t N = int64_t(hn::Lanes(dt));
    const auto zero = hn::Zero(dt), one = hn::Set(dt, T(1));
    for (int i = 0; i < 3; ++i) {
      const auto s = hn::Set(dt, T(start[i])), hi = hn::Set(dt, T(ext[i] - 1));
      for (int64_t j = 0; j < nvp; j += N) {
        const size_t e = size_t(i * nvp + j);
        const auto raw = hn::Add(hn::Add(s, hn::LoadU(dt, &qs.jax[e])), hn::LoadU(dt, &qs.off[e]));
        const auto pos = hn::IfThenElse(hn::Lt(raw, zero), zero, hn::IfThenElse(hn::Gt(raw, hi), hi, raw));
        const auto i0 = hn::IfThenElseZero(hn::Ge(pos, zero), hn::Floor(pos));  // NaN: 0
        hn::StoreU(hn::Sub(pos, i0), dt, &qs.f[e]);
        hn::StoreU(hn::IfThenElseZero(hn::And(hn::Gt(raw, zero), hn::Lt(raw, hi)), one), dt, &qs.g[e]);
        hn::StoreU(to_int(di, i0), di, &qs.at[size_t(2 * i * nvp + j)]);
        hn::StoreU(to_int(di, hn::Min(hn::Add(i0, one), hi)), di, &qs.at[size_t((2 * i + 1) * nvp + j)]);
      }
    }
  }

  // Integral values of a float or double vector as int32 lanes.
  template <class DI, class V>
  static hn::Vec<DI> to_int(DI di, V v) {
    if constexpr (sizeof(hn::TFromV<V>) == 4)
      return hn::ConvertTo(di, v);
    else
      return hn::DemoteTo(di, v);
  }

  // Lanes [j, j + N) of axis i's corner (0 lower, 1 upper) index.
  template <class T, class DI>
  static hn::Vec<DI> at_lanes(const QueryScratch<T>& qs, DI di, int64_t i, int64_t corner, int64_t j) {
    return hn::LoadU(di, &qs.at[size_t((2 * i + corner) * qs.nvp + j)]);
  }

  // Lanes [j, j + N) of a corner's factors per axis (cs[i]: 0 the lower corner, 1 the upper): its weight along the
  // axis, wa, and that weight's d / d offset, da. The trilinear weight is wa[0] wa[1] wa[2], multiplied in that order.
  template <class T, class DT>
  static void corner_axes(const QueryScratch<T>& qs, DT dt, const int64_t* cs, int64_t j, hn::Vec<DT>* wa,
                          hn::Vec<DT>* da) {
    for (int i = 0; i < 3; ++i) {
      const auto f = hn::LoadU(dt, &qs.f[size_t(i * qs.nvp + j)]), g = hn::LoadU(dt, &qs.g[size_t(i * qs.nvp + j)]);
      wa[i] = cs[i] ? f : hn::Sub(hn::Set(dt, T(1)), f);
      da[i] = cs[i] ? g : hn::Neg(g);
    }
  }
};

// One (query, head) of the forward from its group's samples of `Corners` corners each (1: zero offsets): o [d] = sum_j
// softmax_j(scale q.k~_j) v~_j, each score one dot product against the key interpolated from the sample's corners. kb,
// vb: the head's row of token 0, rows `stride` apart. Returns the log-sum-exp.
template <int Corners, class T, class D>
T forward_head(QueryScratch<T>& qs, int64_t nv, const T* qr, const T* kb, const T* vb, int64_t stride, T scale, D d,
               T* o) {
  Row<T, D> qv(d, qs.rows.data()), ks(d, qs.rows.data() + d), ov(d, qs.rows.data() + 2 * d);
  qv.load(qr);
  const int32_t* tok = qs.tok.data();  // [Corners, nvp]
  const T* w = qs.w.data();            // [Corners, nvp]
  const int64_t nvp = qs.nvp;
  T mx = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < nv; ++j) {
    T acc;
    if (Corners == 1) {
      acc = w[j] * qv.dot(kb + tok[j] * stride);
    } else {
      ks.set_scaled(w[j], kb + tok[j] * stride);
      for (int c = 1; c < Corners; ++c) ks.axpy(w[c * nvp + j], kb + tok[c * nvp + j] * stride);
      acc = qv.dot(ks);
    }
    mx = std::max(mx, qs.prob[size_t(j)] = acc * scale);
  }
  const T sum = exp_affine_row(qs.prob.data(), nv, T(1), -mx);
  ov.zero();
  for (int64_t j = 0; j < nv; ++j) {
    const T p = qs.prob[size_t(j)] / sum;  // probability of sample j
    for (int c = 0; c < Corners; ++c) ov.axpy(p * w[c * nvp + j], vb + tok[c * nvp + j] * stride);
  }
  ov.store(o);
  return mx + std::log(sum);
}

// The backward in passes over chunks of queries (geo.query order), each in two phases. Phase 1, parallel over
// query tiles: per (query, head) the probability and score gradient of every sample, hence dq and (summed over each
// group's heads in head order) doffsets, all owned by the query; it keeps each query's distinct corner tokens and
// per head their two coefficients for phase 2. Phase 2, parallel over (sample, grid rows t * H + h congruent mod
// `parts`): dk, dv of the rows a task owns += each token's share, queries in order, all heads (split by head instead,
// two threads would share the cache lines of the same tokens). Every sum runs in an order fixed by the shapes and
// offsets alone: the results do not depend on the thread count or the pass size.
template <class T>
struct Backward {
  const Geometry& geo;
  const T *q, *k, *v, *offsets, *out, *lse, *dout;
  T *dq, *dk, *dv, *doffsets;  // doffsets null: no position gradients
  int64_t B, L, nh, d, P, G, hpg, nv, chunk;
  T scale;
  std::vector<int32_t> toks;     // [B, chunk, G, 8 nv] distinct corner tokens of each query of the pass and group
  std::vector<int32_t> runs;     // [B, chunk, G, 8 nv, 2] their grid-row runs (Geometry::number)
  std::vector<Numbered> counts;  // [B, chunk, G]
  std::vector<T> coef;           // [B, chunk, nh, 8 nv, 2] per token: its share in dk (/ q) and in dv (/ dout)
  std::vector<int32_t> owner;    // [T * H] the phase 2 task of a sample owning grid row r: r % parts (a table, not
                                 // a division per run and head)
  int64_t c0 = 0;                // the pass's first query

  int64_t slot(int64_t b, int64_t m) const { return b * chunk + m - c0; }  // a query's place in the pass
  int64_t at(int64_t b, int64_t tok, int64_t n) const { return ((b * L + tok) * nh + n) * d; }  // a row of q, k...

  // Phase 1 for query m (geo.query order) of sample b; qs and dpos [P, 3] are the task's scratch.
  template <class D>
  void query(int64_t b, int64_t m, QueryScratch<T>& qs, T* dpos, D dc) {
    const int64_t l = geo.query(m);
    const bool window = !offsets && !doffsets;  // one corner per slot: the window's tokens, each once
    for (int64_t g = 0; g < G; ++g) {
      const int64_t sg = slot(b, m) * G + g;
      int32_t* tk = toks.data() + sg * 8 * nv;                                     // [8 nv]
      const T* off = offsets ? offsets + ((b * L + l) * G + g) * P * 3 : nullptr;  // [P, 3]
      if (window)
        geo.samples(l, off, qs);
      else
        geo.samples_box(l, off, qs);
      int32_t* rn = runs.data() + sg * 16 * nv;  // [8 nv, 2]
      const int32_t u =
          (counts[size_t(sg)] = window ? geo.number_window(qs, nv, tk, rn) : geo.number(qs, nv, tk, rn)).u;
      if (doffsets) std::fill(dpos, dpos + P * 3, T(0));
      T* dp = doffsets ? dpos : nullptr;
      for (int64_t n = g * hpg; n < (g + 1) * hpg; ++n)
        window ? query_head<1>(b, m, n, qs, tk, u, dp, dc) : query_head<8>(b, m, n, qs, tk, u, dp, dc);
      if (!doffsets) continue;
      T* dst = doffsets + ((b * L + l) * G + g) * P * 3;  // [P, 3]
      for (int64_t e = 0; e < P * 3; ++e) dst[e] += dpos[e];
    }
  }

  // ... of one head: the distinct tokens' q.k and dout.v give each sample's probability p and score gradient ds;
  // dpos [P, 3] += the head's position gradients (null: none wanted); the tokens' shares go to coef, and dq += them.
  // Corners: the samples' corners per sample, 8 (samples_box) or 1 (the window's).
  template <int Corners, class D>
  void query_head(int64_t b, int64_t m, int64_t n, QueryScratch<T>& qs, const int32_t* tk, int32_t u, T* dpos, D dc) {
    const int64_t l = geo.query(m), row = at(b, l, n), k0 = at(b, 0, n), stride = nh * d;
    Row<T, D> qr(dc, qs.rows.data()), dor(dc, qs.rows.data() + dc), dqr(dc, qs.rows.data() + 2 * dc);
    qr.load(q + row);
    dor.load(dout + row);
    const T delta = dor.dot(out + row), lse_l = lse[(b * nh + n) * L + l];
    T *qk = qs.qk.data(), *dov = qs.dov.data();  // [u]
    for (int32_t t = 0; t < u; ++t) {
      qk[t] = qr.dot(k + k0 + tk[t] * stride);
      dov[t] = dor.dot(v + k0 + tk[t] * stride);
    }
    T* cf = coef.data() + (slot(b, m) * nh + n) * 8 * nv * 2;  // [u, 2]
    std::fill(cf, cf + 2 * u, T(0));
    const int64_t nvp = qs.nvp;
    const int32_t* tok = qs.tok.data();            // [Corners, nvp] distinct token numbers
    const T *w = qs.w.data(), *dw = qs.dw.data();  // [Corners, nvp], [Corners, 3, nvp]
    T *prob = qs.prob.data(), *dp = qs.dp.data();  // [nvp] per sample: its probability, d loss / d probability
    for (int64_t j = 0; j < nv; ++j) {
      T s = 0, e = 0;
      for (int c = 0; c < Corners; ++c) {
        s += w[c * nvp + j] * qk[tok[c * nvp + j]];
        e += w[c * nvp + j] * dov[tok[c * nvp + j]];
      }
      prob[j] = s;
      dp[j] = e;
    }
    exp_affine_row(prob, nv, scale, -lse_l);
    for (int64_t j = 0; j < nv; ++j) {
      const T p = prob[j], ds = p * (dp[j] - delta) * scale;  // probability, d score * scale
      for (int c = 0; c < Corners; ++c) {
        cf[2 * tok[c * nvp + j]] += ds * w[c * nvp + j];
        cf[2 * tok[c * nvp + j] + 1] += p * w[c * nvp + j];
      }
      if (!dpos) continue;
      // d loss / d position: the weight derivatives times each corner's d score share.
      T acc[3] = {0, 0, 0};
      for (int c = 0; c < Corners; ++c) {
        const T e = ds * qk[tok[c * nvp + j]] + p * dov[tok[c * nvp + j]];
        for (int ax = 0; ax < 3; ++ax) acc[ax] += dw[(c * 3 + ax) * nvp + j] * e;
      }
      const int64_t slot = geo.slot(j, nvp);
      for (int ax = 0; ax < 3; ++ax) dpos[slot * 3 + ax] += acc[ax];
    }
    dqr.zero();
    for (int32_t t = 0; t < u; ++t) dqr.axpy(cf[2 * t], k + k0 + tk[t] * stride);
    dqr.add_to(dq + row);
  }

  // Phase 2 for the grid rows r = t * H + h with owner[r] == part of sample b, over the pass's queries [c0, c1) in
  // order: dk, dv += the tokens' shares.
  template <class D>
  void scatter(int64_t b, int32_t part, int64_t c1, D dc, T* scratch) {
    const int64_t stride = nh * d;
    Row<T, D> qr(dc, scratch), dor(dc, scratch + d);  // scratch [2, d]
    for (int64_t m = c0; m < c1; ++m) {
      const int64_t l = geo.query(m);
      for (int64_t n = 0; n < nh; ++n) {
        const int64_t sg = slot(b, m) * G + n / hpg, row = at(b, l, n), k0 = at(b, 0, n);
        const int32_t *tk = toks.data() + sg * 8 * nv, *rn = runs.data() + sg * 16 * nv;  // [u], [runs, 2]
        const T* cf = coef.data() + (slot(b, m) * nh + n) * 8 * nv * 2;                   // [u, 2]
        const Numbered nb = counts[size_t(sg)];
        qr.load(q + row);
        dor.load(dout + row);
        for (int32_t i = 0; i < nb.runs; ++i) {
          if (owner[size_t(rn[2 * i + 1])] != part) continue;
          const int32_t end = i + 1 < nb.runs ? rn[2 * i + 2] : nb.u;
          for (int32_t t = rn[2 * i]; t < end; ++t) {
            qr.axpy_to(cf[2 * t], dk + k0 + tk[t] * stride);
            dor.axpy_to(cf[2 * t + 1], dv + k0 + tk[t] * stride);
          }
        }
      }
    }
  }
};

}  // namespace

template <class T>
void forward(const DsaParams<T>& p) {
  const T *q = p.t.q, *k = p.t.k, *v = p.t.v, *offsets = p.offsets;
  T *out = p.t.out, *lse = p.t.lse;
  const VideoAttentionDims& dims = p.dims;
  const DsaArgs& a = p.args;
  MS_CHECK(a.groups > 0 && dims.nh % a.groups == 0, "dsa: offset groups ", a.groups, " must divide heads ", dims.nh);
  const Geometry geo(dims, a);
  const int64_t L = dims.L(), nh = dims.nh, P = a.P(), G = a.groups, hpg = nh / G, nv = geo.valid();
  const int64_t ntiles = (L + kTileQ - 1) / kTileQ, stride = nh * dims.d;
  const T scale = T(1) / std::sqrt(T(dims.d));
  const double work = double(dims.B * L * nh * dims.d) * double(nv) * (offsets ? 8 : 1);  // corners x 2 rows
  with_head_dim(dims.d, [&](auto d) {
    auto tile = [&](int64_t task) {  // queries [m0, m1) of sample b in geo.query order, all heads
      const int64_t b = task / ntiles, m0 = (task % ntiles) * kTileQ, m1 = std::min(L, m0 + kTileQ);
      QueryScratch<T> qs(geo.slots, nv, dims.d);
      for (int64_t m = m0; m < m1; ++m) {
        const int64_t l = geo.query(m), row = b * L + l;  // query token, its row in [B*L]
        for (int64_t g = 0; g < G; ++g) {
          geo.samples(l, offsets ? offsets + (row * G + g) * P * 3 : nullptr, qs);
          for (int64_t n = g * hpg; n < (g + 1) * hpg; ++n) {
            const int64_t k0 = (b * L * nh + n) * dims.d;  // row tok of this head at k0 + tok * stride
            const T* qr = q + (row * nh + n) * dims.d;
            T* o = out + (row * nh + n) * dims.d;
            lse[(b * nh + n) * L + l] = offsets ? forward_head<8>(qs, nv, qr, k + k0, v + k0, stride, scale, d, o)
                                                : forward_head<1>(qs, nv, qr, k + k0, v + k0, stride, scale, d, o);
          }
        }
      }
    };
    parallel_for(dims.B * ntiles, tile, min_parallel_for_work(dims.B * ntiles, work));
  });
}

template <class T>
void backward(const DsaParams<T>& p) {
  const T* offsets = p.offsets;
  const VideoAttentionDims& dims = p.dims;
  const DsaArgs& a = p.args;
  MS_CHECK(a.groups > 0 && dims.nh % a.groups == 0, "dsa: offset groups ", a.groups, " must divide heads ", dims.nh);
  const Geometry geo(dims, a);
  const int64_t B = dims.B, L = dims.L(), nh = dims.nh, G = a.groups, nv = geo.valid();
  // Queries per pass: as many as kScratchBytes holds, but at least a tile per thread.
  const int64_t per_query = B * 8 * nv * (G * 3 * int64_t(sizeof(int32_t)) + nh * 2 * int64_t(sizeof(T)));
  const int64_t chunk = std::min(L, std::max(kScratchBytes / per_query, kTileQ * num_threads()));
  const int64_t parts = std::max<int64_t>(1, num_threads() / B);  // phase 2 tasks per sample
  Backward<T> bw{geo,
                 p.t.q,
                 p.t.k,
                 p.t.v,
                 offsets,
                 p.t.out,
                 p.t.lse,
                 p.t.dout,
                 p.t.dq,
                 p.t.dk,
                 p.t.dv,
                 p.doffsets,
                 B,
                 L,
                 nh,
                 dims.d,
                 a.P(),
                 G,
                 nh / G,
                 nv,
                 chunk,
                 T(1) / std::sqrt(T(dims.d)),
                 std::vector<int32_t>(size_t(B * chunk * G * 8 * nv)),
                 std::vector<int32_t>(size_t(B * chunk * G * 16 * nv)),
                 std::vector<Numbered>(size_t(B * chunk * G)),
                 std::vector<T>(size_t(B * chunk * nh * 8 * nv * 2)),
                 std::vector<int32_t>(size_t(dims.T * dims.H))};
  for (size_t r = 0; r < bw.owner.size(); ++r) bw.owner[r] = int32_t(int64_t(r) % parts);
  const double work = double(B * nh * dims.d * nv * (offsets ? 8 : 1));  // per query: corners x head dim
  with_head_dim(dims.d, [&](auto d) {
    for (bw.c0 = 0; bw.c0 < L; bw.c0 += chunk) {
      const int64_t c1 = std::min(L, bw.c0 + chunk), ntiles = (c1 - bw.c0 + kTileQ - 1) / kTileQ;
      auto tile = [&](int64_t task) {  // phase 1: queries [m0, m1) of sample b
        const int64_t b = task / ntiles, m0 = bw.c0 + (task % ntiles) * kTileQ, m1 = std::min(c1, m0 + kTileQ);
        QueryScratch<T> qs(geo.slots, nv, dims.d);
        std::vector<T> dpos(size_t(a.P() * 3));  // [P, 3] one (query, group)'s position gradients
        for (int64_t m = m0; m < m1; ++m) bw.query(b, m, qs, dpos.data(), d);
      };
      parallel_for_dynamic(B * ntiles, tile, min_parallel_for_work(B * ntiles, 3 * work * double(c1 - bw.c0)));
      auto rows = [&](int64_t task) {  // phase 2
        std::vector<T> scratch(size_t(2 * dims.d));
        bw.scatter(task / parts, int32_t(task % parts), c1, d, scratch.data());
      };
      parallel_for_dynamic(B * parts, rows, min_parallel_for_work(B * parts, 2 * work * double(c1 - bw.c0)));
    }
  });
}

#define MS_TARGET_ENTRIES(T, S)                             \
  void DsaForward##S(const DsaParams<T>& p) { forward(p); } \
  void DsaBackward##S(const DsaParams<T>& p) { backward(p); }
MS_TARGET_ENTRIES(float, F)
MS_TARGET_ENTRIES(double, D)
#undef MS_TARGET_ENTRIES

}  // namespace ms::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace ms::cpu {

HWY_EXPORT(DsaForwardF);
HWY_EXPORT(DsaForwardD);
HWY_EXPORT(DsaBackwardF);
HWY_EXPORT(DsaBackwardD);

template <>
void dsa_forward<float>(const DsaParams<float>& p) {
  HWY_DYNAMIC_DISPATCH(DsaForwardF)(p);
}
template <>
void dsa_forward<double>(const DsaParams<double>& p) {
  HWY_DYNAMIC_DISPATCH(DsaForwardD)(p);
}
template <>
void dsa_backward<float>(const DsaParams<float>& p) {
  HWY_DYNAMIC_DISPATCH(DsaBackwardF)(p);
}
template <>
void dsa_backward<double>(const DsaParams<double>& p) {
  HWY_DYNAMIC_DISPATCH(DsaBackwardD)(p);
}

}  // namespace ms::cpu
#endif  // HWY_ONCE
