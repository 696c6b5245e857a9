#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/parallel.h"

namespace ms::cpu {
namespace {
constexpr int64_t kTileQ = 64;
constexpr int64_t kTileK = 128;
}  // namespace

template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* out, T* lse, const AttentionDims& a) {
  const int64_t ld = a.nh * a.d, nq_tiles = (a.Lq + kTileQ - 1) / kTileQ;
  const T scale = T(1) / std::sqrt(T(a.d));
  parallel_for(a.B * a.nh * nq_tiles, [&](int64_t task) {
    const int64_t qt = task % nq_tiles, n = (task / nq_tiles) % a.nh, b = task / (nq_tiles * a.nh);
    const int64_t q0 = qt * kTileQ, tq = std::min(kTileQ, a.Lq - q0);
    const T* Q = q + ((b * a.Lq + q0) * a.nh + n) * a.d;  // [tq, d], row stride ld
    std::vector<T> s(size_t(tq * kTileK));                  // scores / probabilities [tq, tk]
    std::vector<T> o(size_t(tq * a.d), T(0));               // unnormalised output [tq, d]
    std::vector<T> m(size_t(tq), -std::numeric_limits<T>::infinity()), l(size_t(tq), T(0));
    for (int64_t k0 = 0; k0 < a.Lk; k0 += kTileK) {
      const int64_t tk = std::min(kTileK, a.Lk - k0);
      const T* K = k + ((b * a.Lk + k0) * a.nh + n) * a.d;
      const T* V = v + ((b * a.Lk + k0) * a.nh + n) * a.d;
      gemm<T>(false, true, tq, tk, a.d, scale, Q, ld, K, ld, T(0), s.data(), tk);
      for (int64_t i = 0; i < tq; ++i) {
        T* row = s.data() + i * tk;
        T mx = m[i];
        for (int64_t j = 0; j < tk; ++j) mx = std::max(mx, row[j]);
        const T corr = std::exp(m[i] - mx);
        T sum = 0;
        for (int64_t j = 0; j < tk; ++j) sum += (row[j] = std::exp(row[j] - mx));
        l[i] = l[i] * corr + sum;
        m[i] = mx;
        for (int64_t c = 0; c < a.d; ++c) o[i * a.d + c] *= corr;
      }
      gemm<T>(false, false, tq, a.d, tk, T(1), s.data(), tk, V, ld, T(1), o.data(), a.d);
    }
    for (int64_t i = 0; i < tq; ++i) {
      T* dst = out + ((b * a.Lq + q0 + i) * a.nh + n) * a.d;
      for (int64_t c = 0; c < a.d; ++c) dst[c] = o[i * a.d + c] / l[i];
      lse[(b * a.nh + n) * a.Lq + q0 + i] = m[i] + std::log(l[i]);
    }
  });
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* out, const T* lse, const T* dout, T* dq, T* dk,
                        T* dv, const AttentionDims& a) {
  const int64_t ld = a.nh * a.d;
  const T scale = T(1) / std::sqrt(T(a.d));
  parallel_for(a.B * a.nh, [&](int64_t task) {
    const int64_t n = task % a.nh, b = task / a.nh;
    std::vector<T> p(size_t(kTileQ * kTileK)), dp(size_t(kTileQ * kTileK));  // [tq, tk]
    std::vector<T> delta(static_cast<size_t>(kTileQ));                                  // rowsum(dout * out) [tq]
    for (int64_t q0 = 0; q0 < a.Lq; q0 += kTileQ) {
      const int64_t tq = std::min(kTileQ, a.Lq - q0), row0 = (b * a.Lq + q0) * a.nh + n;
      const T* Q = q + row0 * a.d;
      const T* dO = dout + row0 * a.d;
      T* dQ = dq + row0 * a.d;
      const T* L = lse + (b * a.nh + n) * a.Lq + q0;
      for (int64_t i = 0; i < tq; ++i) {
        const T* o_i = out + (row0 + i * a.nh) * a.d;
        T s = 0;
        for (int64_t c = 0; c < a.d; ++c) s += o_i[c] * dO[i * ld + c];
        delta[i] = s;
      }
      for (int64_t k0 = 0; k0 < a.Lk; k0 += kTileK) {
        const int64_t tk = std::min(kTileK, a.Lk - k0), krow0 = (b * a.Lk + k0) * a.nh + n;
        const T* K = k + krow0 * a.d;
        const T* V = v + krow0 * a.d;
        gemm<T>(false, true, tq, tk, a.d, scale, Q, ld, K, ld, T(0), p.data(), tk);  // scores
        for (int64_t i = 0; i < tq; ++i)
          for (int64_t j = 0; j < tk; ++j) p[i * tk + j] = std::exp(p[i * tk + j] - L[i]);
        gemm<T>(true, false, tk, a.d, tq, T(1), p.data(), tk, dO, ld, T(1), dv + krow0 * a.d, ld);  // dV += P^T dO
        gemm<T>(false, true, tq, tk, a.d, T(1), dO, ld, V, ld, T(0), dp.data(), tk);                // dP = dO V^T
        for (int64_t i = 0; i < tq; ++i)
          for (int64_t j = 0; j < tk; ++j) dp[i * tk + j] = p[i * tk + j] * (dp[i * tk + j] - delta[i]);  // dS
        gemm<T>(false, false, tq, a.d, tk, scale, dp.data(), tk, K, ld, T(1), dQ, ld);             // dQ += dS K
        gemm<T>(true, false, tk, a.d, tq, scale, dp.data(), tk, Q, ld, T(1), dk + krow0 * a.d, ld);  // dK += dS^T Q
      }
    }
  });
}

#define MS_INSTANTIATE(T)                                                                                      \
  template void attention_forward<T>(const T*, const T*, const T*, T*, T*, const AttentionDims&);            \
  template void attention_backward<T>(const T*, const T*, const T*, const T*, const T*, const T*, T*, T*, T*, \
                                      const AttentionDims&);
MS_INSTANTIATE(float)
MS_INSTANTIATE(double)
#undef MS_INSTANTIATE

}  // namespace ms::cpu
