// The DSA kernels on the GPU (ops/dsa.h, CUDA section): the CPU kernels' sampling geometry (axis_sample below is
// theirs), one warp per (query, head) with the head dim split over the lanes, fp32 throughout on bf16 tensors.
//
// Forward, warp (b, l, n): per valid slot the key and value interpolated from the slot's corners (those of zero
// weight skipped), one score, an online softmax over the slots. Nothing is staged: the corner rows come from L1/L2.
// Backward without atomics on the gradients, in two kernels:
// - per query, warp (b, l, g) over the heads of group g in head order: probabilities a and score gradients ds of
//   every slot (saved as coefficients), dq, and the position gradients summed over the group's heads (shared memory)
//   into doffsets;
// - per key, warp (b, j, n): dk_j += sum ds w q_i and dv_j += sum a w dout_i over the (query i, slot) pairs with j as
//   a corner of weight w. The candidate queries per slot are a box, bounded by the largest |offset| per axis (found
//   first, with an order-free atomicMax); the pairs are visited in a fixed order (slots, then the box in raster order).
// Every sum therefore runs in an order fixed by the shapes and the offsets: deterministic.
#include <algorithm>
#include <cfloat>
#include <type_traits>

#include "backend/cuda/kernel_util.cuh"
#include "ops/dsa.h"

namespace ms::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block

struct Geo {
  int ext[3], win[3], kc[3];  // extents, windows, clipped windows k' = min(k, E)
  int64_t B, L;
  int nh, d, G, P;
  float scale;

  __device__ int64_t row(int64_t b, int64_t tok, int n) const { return ((b * L + tok) * nh + n) * d; }
  __device__ void coords(int64_t tok, int* c) const {
    c[0] = int(tok / (ext[1] * ext[2]));
    c[1] = int(tok / ext[2] % ext[1]);
    c[2] = int(tok % ext[2]);
  }
  __device__ int start(int i, int axis) const { return min(max(i - kc[axis] / 2, 0), ext[axis] - kc[axis]); }
  // The window starts of query token tok per axis.
  __device__ void starts(int64_t tok, int* st) const {
    coords(tok, st);
    for (int i = 0; i < 3; ++i) st[i] = start(st[i], i);
  }
  __device__ int slot(int jt, int jh, int jw) const { return (jt * win[1] + jh) * win[2] + jw; }
};

// Linear interpolation along one axis at base + offset, as the CPU's axis_sample.
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

// The slot's three axis samples for a query with window starts st; off [P, 3] its group's offsets, or null.
__device__ inline void slot_axes(const Geo& g, const int* st, int jt, int jh, int jw, const uint16_t* off, Axis* ax) {
  const int j[3] = {jt, jh, jw}, p = g.slot(jt, jh, jw);
  for (int i = 0; i < 3; ++i) ax[i] = axis_sample(st[i] + j[i], off ? load(off, p * 3 + i) : 0.f, g.ext[i]);
}

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The lane's channels c = lane + 32 t of a row, zero past d.
template <int CH>
__device__ inline void load_row(const uint16_t* r, int d, float (&x)[CH], float alpha = 1.f) {
  for (int t = 0; t < CH; ++t) {
    const int c = int(threadIdx.x % 32) + 32 * t;
    x[t] = c < d ? alpha * load(r, c) : 0.f;
  }
}

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

template <int CH>
__device__ inline float dot(const float (&a)[CH], const float (&b)[CH]) {
  float s = 0;
  for (int t = 0; t < CH; ++t) s += a[t] * b[t];
  return warp_sum(s);
}

// Calls f(corner token, weight, the weight's derivatives per axis) for the 8 corners of a slot.
template <class F>
__device__ inline void for_each_corner(const Geo& g, const Axis* ax, F f) {
  for (int ct = 0; ct < 2; ++ct)
    for (int ch = 0; ch < 2; ++ch)
      for (int cw = 0; cw < 2; ++cw) {
        const int c[3] = {ct, ch, cw};
        float wa[3], da[3];
        int at[3];
        for (int i = 0; i < 3; ++i) {
          wa[i] = c[i] ? ax[i].f : 1.f - ax[i].f;
          da[i] = c[i] ? ax[i].g : -ax[i].g;
          at[i] = c[i] ? ax[i].i1 : ax[i].i0;
        }
        const float dw[3] = {da[0] * wa[1] * wa[2], wa[0] * da[1] * wa[2], wa[0] * wa[1] * da[2]};
        f((int64_t(at[0]) * g.ext[1] + at[1]) * g.ext[2] + at[2], wa[0] * wa[1] * wa[2], dw);
      }
}

template <int CH>
__global__ void __launch_bounds__(kWarps * 32)
    forward_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, uint16_t* out,
                   float* lse, Geo g) {
  const int64_t warp = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= g.B * g.L * g.nh) return;
  const int n = int(warp % g.nh);
  const int64_t bl = warp / g.nh, b = bl / g.L, l = bl % g.L;
  const uint16_t* off = offsets ? offsets + (bl * g.G + n / (g.nh / g.G)) * g.P * 3 : nullptr;  // [P, 3]
  float qr[CH], acc[CH] = {};
  load_row(q + g.row(b, l, n), g.d, qr, g.scale);
  int st[3];
  g.starts(l, st);
  float m = -FLT_MAX, sum = 0;
  for (int jt = 0; jt < g.kc[0]; ++jt)
    for (int jh = 0; jh < g.kc[1]; ++jh)
      for (int jw = 0; jw < g.kc[2]; ++jw) {
        Axis ax[3];
        slot_axes(g, st, jt, jh, jw, off, ax);
        float ks[CH] = {}, vs[CH] = {};
        for_each_corner(g, ax, [&](int64_t tok, float w, const float*) {
          if (w == 0.f) return;  // adds nothing (the CPU drops the same corners)
          axpy_row(w, k + g.row(b, tok, n), g.d, ks);
          axpy_row(w, v + g.row(b, tok, n), g.d, vs);
        });
        const float s = dot(qr, ks), mn = !(s <= m) ? s : m;  // a NaN score propagates
        const float corr = __expf(m - mn), e = __expf(s - mn);
        sum = sum * corr + e;
        for (int t = 0; t < CH; ++t) acc[t] = acc[t] * corr + e * vs[t];
        m = mn;
      }
  for (int t = 0; t < CH; ++t) acc[t] /= sum;
  for (int t = 0; t < CH; ++t) {
    const int c = int(threadIdx.x % 32) + 32 * t;
    if (c < g.d) store(out + g.row(b, l, n), c, acc[t]);
  }
  if (threadIdx.x % 32 == 0) lse[(b * g.nh + n) * g.L + l] = m + logf(sum);
}

// Phase 1, warp (b, l, group): coef [B, nh, L, P] gets (a, ds * scale) per valid slot; dq +=; doffsets += the
// position gradients summed over the group's heads in head order (null: none wanted).
template <int CH>
__global__ void __launch_bounds__(kWarps * 32)
    query_kernel(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, const uint16_t* out,
                 const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* doffsets, float2* coef, Geo g) {
  extern __shared__ float smem[];
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= g.B * g.L * g.G) return;
  const int grp = int(warp % g.G), hpg = g.nh / g.G;
  const int64_t bl = warp / g.G, b = bl / g.L, l = bl % g.L;
  const uint16_t* off = offsets ? offsets + (bl * g.G + grp) * g.P * 3 : nullptr;  // [P, 3]
  float* dpos = smem + (threadIdx.x / 32) * g.P * 3;                               // [P, 3]
  if (doffsets)
    for (int i = lane; i < g.P * 3; i += 32) dpos[i] = 0;
  __syncwarp();
  int st[3];
  g.starts(l, st);
  for (int n = grp * hpg; n < (grp + 1) * hpg; ++n) {
    const int64_t r = g.row(b, l, n);
    float qr[CH], dr[CH], orow[CH], dqa[CH] = {};
    load_row(q + r, g.d, qr);
    load_row(dout + r, g.d, dr);
    load_row(out + r, g.d, orow);
    const float delta = dot(dr, orow), lse_l = lse[(b * g.nh + n) * g.L + l];
    for (int jt = 0; jt < g.kc[0]; ++jt)
      for (int jh = 0; jh < g.kc[1]; ++jh)
        for (int jw = 0; jw < g.kc[2]; ++jw) {
          const int p = g.slot(jt, jh, jw);
          Axis ax[3];
          slot_axes(g, st, jt, jh, jw, off, ax);
          float ks[CH] = {}, vs[CH] = {}, kd[3][CH] = {}, vd[3][CH] = {};
          for_each_corner(g, ax, [&](int64_t tok, float w, const float* dw) {
            const uint16_t *kr = k + g.row(b, tok, n), *vr = v + g.row(b, tok, n);
            if (w != 0.f) {
              axpy_row(w, kr, g.d, ks);
              axpy_row(w, vr, g.d, vs);
            }
            if (!doffsets) return;
            for (int i = 0; i < 3; ++i)
              if (dw[i] != 0.f) {
                axpy_row(dw[i], kr, g.d, kd[i]);
                axpy_row(dw[i], vr, g.d, vd[i]);
              }
          });
          const float a = __expf(g.scale * dot(qr, ks) - lse_l), ds = a * (dot(dr, vs) - delta) * g.scale;
          for (int t = 0; t < CH; ++t) dqa[t] += ds * ks[t];
          if (lane == 0) coef[((b * g.nh + n) * g.L + l) * g.P + p] = make_float2(a, ds);
          if (!doffsets) continue;
          for (int i = 0; i < 3; ++i) {
            const float gp = ds * dot(qr, kd[i]) + a * dot(dr, vd[i]);
            if (lane == 0) dpos[p * 3 + i] += gp;
          }
        }
    add_row(dq + r, g.d, dqa);
  }
  __syncwarp();
  if (!doffsets) return;
  uint16_t* dof = doffsets + (bl * g.G + grp) * g.P * 3;  // [P, 3]
  for (int i = lane; i < g.P * 3; i += 32) store(dof, i, load(dof, i) + dpos[i]);
}

// reach[axis] = the largest |offset| along the axis (as float bits: for non-negative floats, and NaN above +inf,
// the unsigned order is the float order, so atomicMax is exact whatever the order).
__global__ void reach_kernel(const uint16_t* offsets, unsigned* reach, int64_t n) {
  unsigned m[3] = {};
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    m[i % 3] = max(m[i % 3], __float_as_uint(fabsf(load(offsets, i))));
  for (int a = 0; a < 3; ++a) atomicMax(reach + a, m[a]);
}

// Phase 2, warp (b, j, n): dk_j, dv_j += the shares of every (query, slot) with corner j, from coef.
template <int CH>
__global__ void __launch_bounds__(kWarps * 32)
    key_kernel(const uint16_t* q, const uint16_t* offsets, const uint16_t* dout, const float2* coef,
               const unsigned* reach, uint16_t* dk, uint16_t* dv, Geo g) {
  const int lane = int(threadIdx.x % 32);
  const int64_t warp = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
  if (warp >= g.B * g.L * g.nh) return;
  const int n = int(warp % g.nh), grp = n / (g.nh / g.G);
  const int64_t bj = warp / g.nh, b = bj / g.L, j = bj % g.L;
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
            tok = (int64_t(qc[0]) * g.ext[1] + qc[1]) * g.ext[2] + qc[2];
            const uint16_t* off = offsets ? offsets + ((b * g.L + tok) * g.G + grp) * g.P * 3 : nullptr;
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

Geo geometry(const cpu::VideoAttentionDims& d, const cpu::DsaArgs& a) {
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

}  // namespace

void dsa_forward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, uint16_t* out,
                 float* lse, const cpu::VideoAttentionDims& dims, const cpu::DsaArgs& a, Stream stream) {
  const Geo g = geometry(dims, a);
  with_channels(g.d, [&](auto ch) {
    forward_kernel<decltype(ch)::value>
        <<<warp_blocks(g.B * g.L * g.nh), kWarps * 32, 0, stream>>>(q, k, v, offsets, out, lse, g);
    MS_CUDA_CHECK_LAUNCH();
  });
}

void dsa_backward(const uint16_t* q, const uint16_t* k, const uint16_t* v, const uint16_t* offsets, const uint16_t* out,
                  const float* lse, const uint16_t* dout, uint16_t* dq, uint16_t* dk, uint16_t* dv, uint16_t* doffsets,
                  float* scratch, const cpu::VideoAttentionDims& dims, const cpu::DsaArgs& a, Stream stream) {
  const Geo g = geometry(dims, a);
  unsigned* reach = offsets ? reinterpret_cast<unsigned*>(scratch) : nullptr;  // [3], then 1 float of padding
  float2* coef = reinterpret_cast<float2*>(scratch + 4);                       // [B, nh, L, P]
  if (reach) {
    MS_CUDA_CHECK(cudaMemsetAsync(reach, 0, 3 * sizeof(unsigned), stream));
    const int64_t n = g.B * g.L * g.G * g.P * 3;
    reach_kernel<<<std::min(elementwise_blocks(n), 1024u), 256, 0, stream>>>(offsets, reach, n);
    MS_CUDA_CHECK_LAUNCH();
  }
  uint16_t* dof = offsets ? doffsets : nullptr;
  const size_t smem = dof ? size_t(kWarps) * size_t(g.P) * 3 * sizeof(float) : 0;
  with_channels(g.d, [&](auto ch) {
    if (smem > 48 * 1024)
      MS_CUDA_CHECK(cudaFuncSetAttribute(query_kernel<decltype(ch)::value>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         int(smem)));
    query_kernel<decltype(ch)::value><<<warp_blocks(g.B * g.L * g.G), kWarps * 32, smem, stream>>>(
        q, k, v, offsets, out, lse, dout, dq, dof, coef, g);
    MS_CUDA_CHECK_LAUNCH();
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

void dsa_offsets_forward(const uint16_t* raw, uint16_t* offsets, const std::array<double, 3>& range, int64_t N,
                         int64_t M, Stream stream) {
  const int64_t n = N * M * 3;
  if (n == 0) return;
  offsets_forward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(raw, offsets, range3(range), n);
  MS_CUDA_CHECK_LAUNCH();
}

void dsa_offsets_backward(const uint16_t* raw, const uint16_t* doffsets, uint16_t* draw,
                          const std::array<double, 3>& range, int64_t N, int64_t M, Stream stream) {
  const int64_t n = N * M * 3;
  if (n == 0) return;
  offsets_backward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(raw, doffsets, draw, range3(range), n);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
