// A float64 plain-loop umT5 encoder (Wan's T5Encoder.forward, written from wan/modules/t5.py's semantics) for the
// tests: weights read through T5Weights (the same stored values the encoder reads), optional padding with Wan's mask.
#pragma once
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "model/t5_weights.h"

namespace ms::test {

inline std::vector<double> t5_tensor64(const T5Weights& w, const std::string& name, size_t n) {
  std::vector<float> f(n);
  w.read(name, f.data());
  return {f.begin(), f.end()};
}

// Bucket of r = key - query by the closed form of T5's bidirectional bucketing (max distance 128).
inline int64_t t5_bucket64(int64_t r, int64_t buckets) {
  const int64_t half = buckets / 2, exact = half / 2, n = std::abs(r);
  const int64_t b = n < exact ? n
                              : std::min<int64_t>(half - 1, exact + int64_t(std::log(double(n) / exact) /
                                                                            std::log(128.0 / exact) * (half - exact)));
  return (r > 0 ? half : 0) + b;
}

// ids [T] with valid[j] = whether key j is a real token (Wan's mask) -> [T, dim] (padded rows included).
inline std::vector<double> t5_reference(const T5Weights& w, const std::vector<int64_t>& ids,
                                        const std::vector<bool>& valid) {
  const T5Config& c = w.config();
  const int64_t T = int64_t(ids.size()), d = c.dim, da = c.dim_attn, df = c.dim_ffn, H = c.num_heads, hd = c.head_dim(),
                nb = c.num_buckets;
  std::vector<double> x(size_t(T * d));
  const auto emb = t5_tensor64(w, "token_embedding.weight", size_t(c.vocab * d));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < d; ++i) x[size_t(t * d + i)] = emb[size_t(ids[size_t(t)] * d + i)];
  auto norm = [&](const std::vector<double>& in, const std::string& name) {
    const auto g = t5_tensor64(w, name, size_t(d));
    std::vector<double> out(in.size());
    for (int64_t t = 0; t < T; ++t) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i) s += in[size_t(t * d + i)] * in[size_t(t * d + i)];
      const double r = 1 / std::sqrt(s / double(d) + 1e-6);
      for (int64_t i = 0; i < d; ++i) out[size_t(t * d + i)] = g[size_t(i)] * (in[size_t(t * d + i)] * r);
    }
    return out;
  };
  auto linear = [&](const std::vector<double>& in, int64_t n_in, const std::string& name, int64_t n_out) {
    const auto W = t5_tensor64(w, name, size_t(n_in * n_out));  // [n_out, n_in]
    std::vector<double> out(size_t(T * n_out));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < n_out; ++o) {
        double s = 0;
        for (int64_t i = 0; i < n_in; ++i) s += in[size_t(t * n_in + i)] * W[size_t(o * n_in + i)];
        out[size_t(t * n_out + o)] = s;
      }
    return out;
  };
  const std::string shared = "pos_embedding.embedding.weight";
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    const auto table = t5_tensor64(w, c.shared_pos ? shared : p + "pos_embedding.embedding.weight", size_t(nb * H));
    auto h = norm(x, p + "norm1.weight");
    const auto q = linear(h, d, p + "attn.q.weight", da), k = linear(h, d, p + "attn.k.weight", da),
               v = linear(h, d, p + "attn.v.weight", da);
    std::vector<double> y(size_t(T * da), 0.0);
    for (int64_t head = 0; head < H; ++head)
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(static_cast<size_t>(T));
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += q[size_t(i * da + head * hd + e)] * k[size_t(j * da + head * hd + e)];
          // Wan: a hidden key's bias is the lowest double, then q.k is added
          s[size_t(j)] = (valid[size_t(j)] ? table[size_t(t5_bucket64(j - i, nb) * H + head)]
                                           : std::numeric_limits<double>::lowest()) +
                         dot;
          mx = std::max(mx, s[size_t(j)]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (int64_t j = 0; j < T; ++j)
          for (int64_t e = 0; e < hd; ++e)
            y[size_t(i * da + head * hd + e)] += s[size_t(j)] / z * v[size_t(j * da + head * hd + e)];
      }
    const auto o = linear(y, da, p + "attn.o.weight", d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    h = norm(x, p + "norm2.weight");
    auto g = linear(h, d, p + "ffn.gate.0.weight", df);
    const auto f = linear(h, d, p + "ffn.fc1.weight", df);
    for (size_t i = 0; i < g.size(); ++i) {
      const double u = g[i];
      g[i] = 0.5 * u * (1 + std::tanh(std::sqrt(2 / M_PI) * (u + 0.044715 * u * u * u))) * f[i];
    }
    const auto o2 = linear(g, df, p + "ffn.fc2.weight", d);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o2[i];
  }
  return norm(x, "norm.weight");
}

}  // namespace ms::test
