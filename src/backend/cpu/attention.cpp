#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/softmax_row.h"
#include "core/parallel.h"

namespace ms::cpu {
namespace {
// Query and key tiles: 256 x 256 scores (256 KiB per thread, twice in the backward) make the tile GEMMs large enough
// for OpenBLAS's packing to pay; 64 x 128 ran dense attention at about 0.75 of sgemm, 256 x 256 at 0.86-0.9
// (docs/benchmarks.md, issue 34).
constexpr int64_t kTileQ = 256;
constexpr int64_t kTileK = 256;
}  // namespace

template <class T>
void attention_forward_head(const T* q, const T* k, const T* v, T* out, T* lse, int64_t Lq, int64_t Lk, int64_t d,
                            int64_t ld) {
  const T scale = T(1) / std::sqrt(T(d));
  const int64_t mq = std::min(kTileQ, Lq), mk = std::min(kTileK, Lk);  // largest tiles: small calls stay small
  std::vector<T> s(size_t(mq * mk));                                   // scores / probabilities [tq, tk]
  std::vector<T> o(size_t(mq * d));                                    // unnormalised output [tq, d]
  std::vector<T> m(static_cast<size_t>(mq)), l(static_cast<size_t>(mq));
  for (int64_t q0 = 0; q0 < Lq; q0 += kTileQ) {
    const int64_t tq = std::min(kTileQ, Lq - q0);
    const T* Q = q + q0 * ld;  // [tq, d], row stride ld
    std::fill(o.begin(), o.end(), T(0));
    std::fill(m.begin(), m.end(), -std::numeric_limits<T>::infinity());
    std::fill(l.begin(), l.end(), T(0));
    for (int64_t k0 = 0; k0 < Lk; k0 += kTileK) {
      const int64_t tk = std::min(kTileK, Lk - k0);
      gemm<T>(false, true, tq, tk, d, scale, Q, ld, k + k0 * ld, ld, T(0), s.data(), tk);
      for (int64_t i = 0; i < tq; ++i) {
        T* row = s.data() + i * tk;
        const T mx = row_max(row, tk, m[i]);
        const T corr = std::exp(m[i] - mx);
        l[i] = l[i] * corr + exp_affine(row, tk, T(1), -mx);
        m[i] = mx;
        for (int64_t c = 0; c < d; ++c) o[i * d + c] *= corr;
      }
      gemm<T>(false, false, tq, d, tk, T(1), s.data(), tk, v + k0 * ld, ld, T(1), o.data(), d);
    }
    for (int64_t i = 0; i < tq; ++i) {
      T* dst = out + (q0 + i) * ld;
      for (int64_t c = 0; c < d; ++c) dst[c] = o[i * d + c] / l[i];
      lse[q0 + i] = m[i] + std::log(l[i]);
    }
  }
}

template <class T>
void attention_backward_head(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq,
                             T* dk, T* dv, int64_t Lq, int64_t Lk, int64_t d, int64_t ld) {
  const T scale = T(1) / std::sqrt(T(d));
  const int64_t mq = std::min(kTileQ, Lq), mk = std::min(kTileK, Lk);
  std::vector<T> p(size_t(mq * mk)), dp(size_t(mq * mk));  // [tq, tk]
  std::vector<T> delta(static_cast<size_t>(mq));           // rowsum(dout * out) [tq]
  for (int64_t q0 = 0; q0 < Lq; q0 += kTileQ) {
    const int64_t tq = std::min(kTileQ, Lq - q0);
    const T* Q = q + q0 * ld;
    const T* dO = dout + q0 * ld;
    T* dQ = dq + q0 * ld;
    const T* L = lse + q0;
    for (int64_t i = 0; i < tq; ++i) {
      const T* o_i = out + (q0 + i) * ld;
      T s = 0;
      for (int64_t c = 0; c < d; ++c) s += o_i[c] * dO[i * ld + c];
      delta[i] = s;
    }
    for (int64_t k0 = 0; k0 < Lk; k0 += kTileK) {
      const int64_t tk = std::min(kTileK, Lk - k0);
      const T* K = k + k0 * ld;
      const T* V = v + k0 * ld;
      gemm<T>(false, true, tq, tk, d, scale, Q, ld, K, ld, T(0), p.data(), tk);  // scores
      for (int64_t i = 0; i < tq; ++i) exp_affine(p.data() + i * tk, tk, T(1), -L[i]);
      gemm<T>(true, false, tk, d, tq, T(1), p.data(), tk, dO, ld, T(1), dv + k0 * ld, ld);  // dV += P^T dO
      gemm<T>(false, true, tq, tk, d, T(1), dO, ld, V, ld, T(0), dp.data(), tk);            // dP = dO V^T
      for (int64_t i = 0; i < tq; ++i)
        for (int64_t j = 0; j < tk; ++j) dp[i * tk + j] = p[i * tk + j] * (dp[i * tk + j] - delta[i]);  // dS
      gemm<T>(false, false, tq, d, tk, scale, dp.data(), tk, K, ld, T(1), dQ, ld);                      // dQ += dS K
      gemm<T>(true, false, tk, d, tq, scale, dp.data(), tk, Q, ld, T(1), dk + k0 * ld, ld);             // dK += dS^T Q
    }
  }
}

template <class T>
void attention_forward(const AttentionParams<T>& p) {
  const T *q = p.t.q, *k = p.t.k, *v = p.t.v;
  T *out = p.t.out, *lse = p.t.lse;
  const AttentionDims& a = p.dims;
  const int64_t ld = a.nh * a.d, nq_tiles = (a.Lq + kTileQ - 1) / kTileQ;
  parallel_for(a.B * a.nh * nq_tiles, [&](int64_t task) {
    const int64_t qt = task % nq_tiles, n = (task / nq_tiles) % a.nh, b = task / (nq_tiles * a.nh);
    const int64_t q0 = qt * kTileQ, tq = std::min(kTileQ, a.Lq - q0);
    const int64_t qrow = (b * a.Lq + q0) * a.nh + n, krow = b * a.Lk * a.nh + n;
    attention_forward_head(q + qrow * a.d, k + krow * a.d, v + krow * a.d, out + qrow * a.d,
                           lse + (b * a.nh + n) * a.Lq + q0, tq, a.Lk, a.d, ld);
  });
}

template <class T>
void attention_backward(const AttentionParams<T>& p) {
  const T *q = p.t.q, *k = p.t.k, *v = p.t.v, *out = p.t.out, *lse = p.t.lse, *dout = p.t.dout;
  T *dq = p.t.dq, *dk = p.t.dk, *dv = p.t.dv;
  const AttentionDims& a = p.dims;
  const int64_t ld = a.nh * a.d;
  parallel_for(a.B * a.nh, [&](int64_t task) {
    const int64_t n = task % a.nh, b = task / a.nh;
    const int64_t q0 = (b * a.Lq * a.nh + n) * a.d, k0 = (b * a.Lk * a.nh + n) * a.d;  // first row of (b, n)
    attention_backward_head(q + q0, k + k0, v + k0, out + q0, lse + (b * a.nh + n) * a.Lq, dout + q0, dq + q0, dk + k0,
                            dv + k0, a.Lq, a.Lk, a.d, ld);
  });
}

#define MS_INSTANTIATE(T)                                                                                            \
  template void attention_forward<T>(const AttentionParams<T>&);                                                     \
  template void attention_backward<T>(const AttentionParams<T>&);                                                    \
  template void attention_forward_head<T>(const T*, const T*, const T*, T*, T*, int64_t, int64_t, int64_t, int64_t); \
  template void attention_backward_head<T>(const T*, const T*, const T*, const T*, const T*, const T*, T*, T*, T*,   \
                                           int64_t, int64_t, int64_t, int64_t);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms::cpu
