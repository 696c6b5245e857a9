// Plain float64 loops for the CUDA tests' references where the CPU kernel would need OpenBLAS, which the lean
// test binary does not link: dense attention written out (softmax materialised) and the linear layer.
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "cuda_util.h"
#include "ops/attention.h"

namespace ms::test {

struct AttentionReference {
  std::vector<double> out, lse, dq, dk, dv;
};

// Which query i may attend to key j (null: every pair).
using AttentionMask = std::function<bool(int64_t i, int64_t j)>;

// softmax(q k^T / sqrt(d)) v per head and its gradients, in float64, over the pairs `allowed` admits; dq, dk, dv
// start from the given values.
inline AttentionReference reference_attention(const AttentionDims& a, const std::vector<double>& q,
                                              const std::vector<double>& k, const std::vector<double>& v,
                                              const std::vector<double>& dout, std::vector<double> dq,
                                              std::vector<double> dk, std::vector<double> dv,
                                              const AttentionMask& allowed = nullptr) {
  AttentionReference r{
      std::vector<double>(q.size()), std::vector<double>(static_cast<size_t>(a.B * a.nh * a.Lq)), {}, {}, {}};
  const double scale = 1.0 / std::sqrt(double(a.d));
  auto at = [&](int64_t b, int64_t i, int64_t h, int64_t L) {
    return static_cast<size_t>(((b * L + i) * a.nh + h) * a.d);
  };
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t h = 0; h < a.nh; ++h)
      for (int64_t i = 0; i < a.Lq; ++i) {
        std::vector<double> p(static_cast<size_t>(a.Lk));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < a.Lk; ++j) {
          double s = 0;
          for (int64_t c = 0; c < a.d; ++c)
            s += q[at(b, i, h, a.Lq) + static_cast<size_t>(c)] * k[at(b, j, h, a.Lk) + static_cast<size_t>(c)];
          p[static_cast<size_t>(j)] = allowed && !allowed(i, j) ? -INFINITY : s * scale;
          mx = std::max(mx, p[static_cast<size_t>(j)]);
        }
        for (double& x : p) sum += (x = std::exp(x - mx));
        for (double& x : p) x /= sum;
        r.lse[static_cast<size_t>((b * a.nh + h) * a.Lq + i)] = mx + std::log(sum);
        double delta = 0;
        for (int64_t c = 0; c < a.d; ++c) {
          double o = 0;
          for (int64_t j = 0; j < a.Lk; ++j)
            o += p[static_cast<size_t>(j)] * v[at(b, j, h, a.Lk) + static_cast<size_t>(c)];
          r.out[at(b, i, h, a.Lq) + static_cast<size_t>(c)] = o;
          delta += o * dout[at(b, i, h, a.Lq) + static_cast<size_t>(c)];
        }
        for (int64_t j = 0; j < a.Lk; ++j) {
          double dp = 0;
          for (int64_t c = 0; c < a.d; ++c)
            dp += dout[at(b, i, h, a.Lq) + static_cast<size_t>(c)] * v[at(b, j, h, a.Lk) + static_cast<size_t>(c)];
          const double ds = p[static_cast<size_t>(j)] * (dp - delta) * scale;
          for (int64_t c = 0; c < a.d; ++c) {
            dq[at(b, i, h, a.Lq) + static_cast<size_t>(c)] += ds * k[at(b, j, h, a.Lk) + static_cast<size_t>(c)];
            dk[at(b, j, h, a.Lk) + static_cast<size_t>(c)] += ds * q[at(b, i, h, a.Lq) + static_cast<size_t>(c)];
            dv[at(b, j, h, a.Lk) + static_cast<size_t>(c)] +=
                p[static_cast<size_t>(j)] * dout[at(b, i, h, a.Lq) + static_cast<size_t>(c)];
          }
        }
      }
  r.dq = std::move(dq), r.dk = std::move(dk), r.dv = std::move(dv);
  return r;
}

// x [N, in], w [out, in], b [out] or empty -> y [N, out] = x w^T + b.
inline void reference_linear_forward(const double* x, const double* w, const double* b, double* y, int64_t N,
                                     int64_t in, int64_t out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      double s = b ? b[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) s += x[n * in + i] * w[o * in + i];
      y[n * out + o] = s;
    }
}

// Inverts it: dx += dy w (when dx), dw += dy^T x, db += sum_n dy (when db).
inline void reference_linear_backward(const double* x, const double* w, const double* dy, double* dx, double* dw,
                                      double* db, int64_t N, int64_t in, int64_t out) {
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < out; ++o) {
      const double g = dy[n * out + o];
      if (db) db[o] += g;
      for (int64_t i = 0; i < in; ++i) {
        if (dx) dx[n * in + i] += g * w[o * in + i];
        dw[o * in + i] += g * x[n * in + i];
      }
    }
}

}  // namespace ms::test
