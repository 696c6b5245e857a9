#include "ops/dsa.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace ms::cpu {
namespace {

constexpr int64_t kTileQ = 16;         // forward: queries per task
constexpr int64_t kColumn = 16;        // query order: width of the column blocks the grid is walked in
constexpr int64_t kScratch = 1 << 20;  // backward: position-gradient scratch elements (sets the queries per pass)

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

template <class T>
T dot(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// y = alpha x.
template <class T>
void scaled_copy(T alpha, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = alpha * x[i];
}

template <class T>
void axpy(T alpha, const T* x, T* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// The backward's per-corner work in one pass over the head dim: *ab = a.b and *cd = c.d.
template <class T>
void dot2(const T* a, const T* b, const T* c, const T* d, int64_t n, T* ab, T* cd) {
  T s = 0, t = 0;
#pragma omp simd reduction(+ : s, t)
  for (int64_t i = 0; i < n; ++i) {
    s += a[i] * b[i];
    t += c[i] * d[i];
  }
  *ab = s;
  *cd = t;
}

// ... and its scatter: dq += alpha k, dk += alpha q, dv += beta dout.
template <class T>
void axpy3(T alpha, T beta, const T* k, const T* q, const T* dout, T* dq, T* dk, T* dv, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    dq[i] += alpha * k[i];
    dk[i] += alpha * q[i];
    dv[i] += beta * dout[i];
  }
}

// Linear interpolation along one axis at s + j + offset.
template <class T>
struct AxisSample {
  int64_t i0, i1;  // corners floor(pos), min(floor(pos) + 1, E - 1)
  T f;             // weight of i1; i0 gets 1 - f
  T g;             // d pos / d offset: 1 strictly inside (0, E - 1), 0 where clamped
  int n;           // corners that matter: 1 when i1 has zero weight and no gradient is wanted
};

template <class T>
[[gnu::always_inline]] inline AxisSample<T> axis_sample(int64_t base, T offset, int64_t E, bool want_grad) {
  const T raw = T(base) + offset, hi = T(E - 1);
  const bool inside = raw > T(0) && raw < hi;
  const T pos = std::clamp(raw, T(0), hi);
  AxisSample<T> s;
  // pos >= 0: truncation is floor. A NaN offset reads corner 0 with NaN weights: it propagates, never out of bounds.
  s.i0 = pos >= T(0) ? std::min(int64_t(pos), E - 1) : 0;
  s.i1 = std::min(s.i0 + 1, E - 1);
  s.f = pos - T(s.i0);
  s.g = inside ? T(1) : T(0);
  s.n = (s.f != T(0) || (want_grad && inside)) ? 2 : 1;
  return s;
}

// One sample slot of one query: its trilinear corners (corners of zero weight and zero use are dropped).
template <class T>
struct Sample {
  int64_t slot;    // p
  int n;           // corners, 1..8
  int64_t tok[8];  // corner token index within the sample's grid
  T w[8];          // interpolation weight
  T dw[8][3];      // d w / d offset per axis (zero on clamped axes); filled only when gradients are wanted
};

// The fixed part of the geometry: extents, window sizes and clipped window sizes k' = min(k, E).
struct Geometry {
  int64_t ext[3], win[3], kc[3];
  Geometry(const VideoAttentionDims& d, const DsaArgs& a) : ext{d.T, d.H, d.W} {
    for (int i = 0; i < 3; ++i) {
      MS_CHECK(a.window[size_t(i)] > 0, "dsa: window entry ", i, " is ", a.window[size_t(i)]);
      win[i] = a.window[size_t(i)];
      kc[i] = std::min(win[i], ext[i]);
    }
  }

  size_t valid() const { return size_t(kc[0] * kc[1] * kc[2]); }  // valid slots per query, nv

  // Query order: the grid is cut into column blocks kColumn tokens wide (the last may be narrower) and walked
  // block by block, (t, h, w) inside each, so that the K/V rows which consecutive queries reach (a few frames x
  // rows x a block's width plus the halo) stay in cache however wide the video. Returns the token of the m-th
  // query, m in [0, L).
  int64_t query(int64_t m) const {
    const int64_t cb = std::min(kColumn, ext[2]), rows = ext[0] * ext[1], full = ext[2] / cb;
    const int64_t block = std::min(m / (rows * cb), full), width = block < full ? cb : ext[2] - full * cb;
    const int64_t rem = m - block * rows * cb;
    return (rem / width) * ext[2] + block * cb + rem % width;
  }

  // Fills s[0..nv) with the valid slots of query token `tok` (t-major slot order) and returns nv.
  // off [P, 3] holds the query's offsets for its group, or is null for zero offsets.
  template <class T>
  int64_t samples(int64_t tok, const T* off, bool want_grad, Sample<T>* s) const {
    const int64_t idx[3] = {tok / (ext[1] * ext[2]), (tok / ext[2]) % ext[1], tok % ext[2]};
    int64_t start[3];
    for (int i = 0; i < 3; ++i) start[i] = std::clamp(idx[i] - kc[i] / 2, int64_t(0), ext[i] - kc[i]);
    int64_t nv = 0;
    for (int64_t jt = 0; jt < kc[0]; ++jt)
      for (int64_t jh = 0; jh < kc[1]; ++jh)
        for (int64_t jw = 0; jw < kc[2]; ++jw) {
          const int64_t p = (jt * win[1] + jh) * win[2] + jw, j[3] = {jt, jh, jw};
          AxisSample<T> ax[3];
          for (int i = 0; i < 3; ++i)
            ax[i] = axis_sample(start[i] + j[i], off ? off[p * 3 + i] : T(0), ext[i], want_grad);
          Sample<T>& sm = s[nv++];
          sm.slot = p;
          sm.n = 0;
          for (int ct = 0; ct < ax[0].n; ++ct)
            for (int ch = 0; ch < ax[1].n; ++ch)
              for (int cw = 0; cw < ax[2].n; ++cw) {
                const int c[3] = {ct, ch, cw};
                T wa[3], da[3];  // per-axis weight and its derivative
                int64_t at[3];   // corner index per axis
                for (int i = 0; i < 3; ++i) {
                  wa[i] = c[i] ? ax[i].f : T(1) - ax[i].f;
                  da[i] = c[i] ? ax[i].g : -ax[i].g;
                  at[i] = c[i] ? ax[i].i1 : ax[i].i0;
                }
                sm.tok[sm.n] = (at[0] * ext[1] + at[1]) * ext[2] + at[2];
                sm.w[sm.n] = wa[0] * wa[1] * wa[2];
                if (want_grad) {
                  sm.dw[sm.n][0] = da[0] * wa[1] * wa[2];
                  sm.dw[sm.n][1] = wa[0] * da[1] * wa[2];
                  sm.dw[sm.n][2] = wa[0] * wa[1] * da[2];
                }
                ++sm.n;
              }
        }
    return nv;
  }
};

}  // namespace

template <class T>
void dsa_forward(const T* q, const T* k, const T* v, const T* offsets, T* out, T* lse, const VideoAttentionDims& dims,
                 const DsaArgs& a) {
  MS_CHECK(a.groups > 0 && dims.nh % a.groups == 0, "dsa: offset groups ", a.groups, " must divide heads ", dims.nh);
  const Geometry geo(dims, a);
  const int64_t L = dims.L(), nh = dims.nh, P = a.P(), G = a.groups, hpg = nh / G;
  const int64_t ntiles = (L + kTileQ - 1) / kTileQ;
  const T scale = T(1) / std::sqrt(T(dims.d));
  const double work = double(dims.B * L * nh * dims.d) * double(geo.valid()) * (offsets ? 16 : 2);  // 8 or 1 corners
  with_head_dim(dims.d, [&](auto d) {
    auto tile = [&](int64_t task) {  // queries [l0, l1) of sample b in geo.query order, all heads
      const int64_t b = task / ntiles, l0 = (task % ntiles) * kTileQ, l1 = std::min(L, l0 + kTileQ);
      std::vector<Sample<T>> smp(geo.valid());  // valid samples of one (query, group) [nv]
      std::vector<T> s(geo.valid());            // scores, then exp(score - max) [nv]
      std::vector<T> ks(size_t(dims.d));        // one sample's interpolated key [d]
      for (int64_t m = l0; m < l1; ++m) {
        const int64_t l = geo.query(m), row = b * L + l;  // query token, its row in [B*L]
        for (int64_t g = 0; g < G; ++g) {
          const int64_t nv = geo.samples(l, offsets ? offsets + (row * G + g) * P * 3 : nullptr, false, smp.data());
          for (int64_t n = g * hpg; n < (g + 1) * hpg; ++n) {
            const T* qr = q + (row * nh + n) * d;    // [d]
            const T* kb = k + (b * L * nh + n) * d;  // row tok of this head at kb + tok * nh * d
            const T* vb = v + (b * L * nh + n) * d;
            T mx = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < nv; ++j) {  // q . (the key interpolated at the sample): one reduction per sample
              const Sample<T>& sm = smp[j];
              T acc;
              if (sm.n == 1) {
                acc = sm.w[0] * dot(qr, kb + sm.tok[0] * nh * d, d);
              } else {
                scaled_copy(sm.w[0], kb + sm.tok[0] * nh * d, ks.data(), d);
                for (int c = 1; c < sm.n; ++c) axpy(sm.w[c], kb + sm.tok[c] * nh * d, ks.data(), d);
                acc = dot(qr, ks.data(), d);
              }
              s[j] = acc * scale;
              mx = std::max(mx, s[j]);
            }
            T sum = 0;
            for (int64_t j = 0; j < nv; ++j) sum += (s[j] = std::exp(s[j] - mx));
            T* o = out + (row * nh + n) * d;  // [d]
            std::fill(o, o + d, T(0));
            for (int64_t j = 0; j < nv; ++j) {
              const T p = s[j] / sum;  // probability of sample j
              for (int c = 0; c < smp[j].n; ++c) axpy(p * smp[j].w[c], vb + smp[j].tok[c] * nh * d, o, d);
            }
            lse[(b * nh + n) * L + l] = mx + std::log(sum);
          }
        }
      }
    };
    parallel_for(dims.B * ntiles, tile, min_parallel_for_work(dims.B * ntiles, work));
  });
}

template <class T>
void dsa_backward(const T* q, const T* k, const T* v, const T* offsets, const T* out, const T* lse, const T* dout,
                  T* dq, T* dk, T* dv, T* doffsets, const VideoAttentionDims& dims, const DsaArgs& a) {
  MS_CHECK(a.groups > 0 && dims.nh % a.groups == 0, "dsa: offset groups ", a.groups, " must divide heads ", dims.nh);
  const Geometry geo(dims, a);
  const int64_t B = dims.B, L = dims.L(), nh = dims.nh, P = a.P(), G = a.groups, hpg = nh / G;
  const bool want_grad = doffsets != nullptr;
  const T scale = T(1) / std::sqrt(T(dims.d));
  // Queries per pass: all without offset gradients, else as many as kScratch holds (at least one).
  const int64_t chunk = want_grad ? std::clamp<int64_t>(kScratch / (B * nh * P * 3), 1, L) : L;
  // Per-head position gradients of one chunk of queries [B, chunk, nh, P, 3], summed over each group's heads
  // after the chunk's pass.
  std::vector<T> dpos(want_grad ? size_t(B * chunk * nh * P * 3) : 0);
  for (int64_t c0 = 0; c0 < L; c0 += chunk) {
    const int64_t c1 = std::min(L, c0 + chunk);
    // Queries [c0, c1) (geo.query order) of one (sample, head), in order: this task alone writes dk, dv of that head.
    auto head = [&](int64_t task, auto d) {
      const int64_t b = task / nh, n = task % nh, g = n / hpg;
      std::vector<Sample<T>> smp(geo.valid());    // [nv]
      const int64_t base = (b * L * nh + n) * d;  // row tok of this head at base + tok * nh * d
      for (int64_t m = c0; m < c1; ++m) {
        const int64_t l = geo.query(m), row = b * L + l;
        const int64_t nv = geo.samples(l, offsets ? offsets + (row * G + g) * P * 3 : nullptr, want_grad, smp.data());
        const T* qr = q + (row * nh + n) * d;      // [d]
        const T* dor = dout + (row * nh + n) * d;  // [d]
        T* dqr = dq + (row * nh + n) * d;          // [d]
        const T delta = dot(dor, out + (row * nh + n) * d, d), lse_l = lse[(b * nh + n) * L + l];
        T* dp_l = want_grad ? dpos.data() + ((b * chunk + m - c0) * nh + n) * P * 3 : nullptr;  // [P, 3]
        if (dp_l) std::fill(dp_l, dp_l + P * 3, T(0));
        for (int64_t j = 0; j < nv; ++j) {
          const Sample<T>& sm = smp[j];
          T qk[8], dov[8], s = 0, dp = 0;  // corner dot products q.k_c, dout.v_c
          for (int c = 0; c < sm.n; ++c) {
            dot2(qr, k + base + sm.tok[c] * nh * d, dor, v + base + sm.tok[c] * nh * d, d, &qk[c], &dov[c]);
            s += sm.w[c] * qk[c];
            dp += sm.w[c] * dov[c];
          }
          const T p = std::exp(s * scale - lse_l), ds = p * (dp - delta);  // probability, d score
          for (int c = 0; c < sm.n; ++c) {
            if (sm.w[c] == T(0)) continue;  // a corner kept only for the position gradient
            const int64_t at = base + sm.tok[c] * nh * d;
            axpy3(ds * scale * sm.w[c], p * sm.w[c], k + at, qr, dor, dqr, dk + at, dv + at, d);
          }
          if (!dp_l) continue;
          for (int ax = 0; ax < 3; ++ax) {
            T acc = 0;
            for (int c = 0; c < sm.n; ++c) acc += sm.dw[c][ax] * (ds * scale * qk[c] + p * dov[c]);
            dp_l[sm.slot * 3 + ax] = acc;
          }
        }
      }
    };
    const double work = double(B * (c1 - c0) * nh * dims.d) * double(geo.valid()) * (want_grad ? 40 : 5);
    with_head_dim(dims.d, [&](auto d) {
      parallel_for(
          B * nh, [&](int64_t task) { head(task, d); }, min_parallel_for_work(B * nh, work));
    });
    if (!want_grad) continue;
    auto reduce = [&](int64_t task) {  // doffsets of one query += the sum of its group's heads, in head order
      const int64_t b = task / (c1 - c0), m = c0 + task % (c1 - c0), l = geo.query(m);
      const T* src = dpos.data() + (b * chunk + m - c0) * nh * P * 3;  // [nh, P, 3]
      T* dst = doffsets + (b * L + l) * G * P * 3;                     // [G, P, 3]
      for (int64_t g = 0; g < G; ++g)
        for (int64_t e = 0; e < P * 3; ++e) {
          T acc = 0;
          for (int64_t r = 0; r < hpg; ++r) acc += src[(g * hpg + r) * P * 3 + e];
          dst[g * P * 3 + e] += acc;
        }
    };
    parallel_for(B * (c1 - c0), reduce, min_parallel_for_work(B * (c1 - c0), double(B * (c1 - c0) * nh * P * 3)));
  }
}

template <class T>
void dsa_offsets_forward(const T* raw, T* offsets, const std::array<double, 3>& range, int64_t N, int64_t M) {
  parallel_for(
      N,
      [&](int64_t n) {
        for (int64_t i = 0; i < M * 3; ++i)
          offsets[n * M * 3 + i] = T(range[size_t(i % 3)]) * std::tanh(raw[n * M * 3 + i]);
      },
      min_parallel_for_work(N, 20.0 * double(N * M * 3)));  // tanh: ~20 multiply-adds
}

template <class T>
void dsa_offsets_backward(const T* raw, const T* doffsets, T* draw, const std::array<double, 3>& range, int64_t N,
                          int64_t M) {
  parallel_for(
      N,
      [&](int64_t n) {
        for (int64_t i = 0; i < M * 3; ++i) {
          const T t = std::tanh(raw[n * M * 3 + i]);
          draw[n * M * 3 + i] = doffsets[n * M * 3 + i] * T(range[size_t(i % 3)]) * (T(1) - t * t);
        }
      },
      min_parallel_for_work(N, 20.0 * double(N * M * 3)));
}

#define MS_INSTANTIATE(T)                                                                                             \
  template void dsa_forward<T>(const T*, const T*, const T*, const T*, T*, T*, const VideoAttentionDims&,             \
                               const DsaArgs&);                                                                       \
  template void dsa_backward<T>(const T*, const T*, const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, \
                                const VideoAttentionDims&, const DsaArgs&);                                           \
  template void dsa_offsets_forward<T>(const T*, T*, const std::array<double, 3>&, int64_t, int64_t);                 \
  template void dsa_offsets_backward<T>(const T*, const T*, T*, const std::array<double, 3>&, int64_t, int64_t);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms::cpu
