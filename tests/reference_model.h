// An independent float64 reference of the Wan2.1 T2V forward for the tests, written as plain loops
// straight from docs/model.md, docs/attention.md (direct Conv3d, materialised softmax, complex-number RoPE, brute-force masks,
// explicit trilinear corners). It shares no code with the engine's kernels.
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"

namespace ms::test {

using Vec = std::vector<double>;
using Weights = std::map<std::string, Vec>;

// x [n, in] -> [n, out]
inline Vec ref_linear(const Weights& W, const std::string& name, const Vec& x, int64_t n, int64_t in, int64_t out) {
  const Vec& w = W.at(name + ".weight");
  const Vec& b = W.at(name + ".bias");
  Vec y(size_t(n * out));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < out; ++o) {
      double s = b[o];
      for (int64_t k = 0; k < in; ++k) s += x[i * in + k] * w[o * in + k];
      y[i * out + o] = s;
    }
  return y;
}

inline Vec ref_layernorm(const Vec& x, int64_t n, int64_t c, double eps, const Vec* w = nullptr,
                         const Vec* b = nullptr) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int64_t k = 0; k < c; ++k) m += x[i * c + k] / c;
    for (int64_t k = 0; k < c; ++k) v += (x[i * c + k] - m) * (x[i * c + k] - m) / c;
    for (int64_t k = 0; k < c; ++k) {
      double z = (x[i * c + k] - m) / std::sqrt(v + eps);
      y[i * c + k] = w ? z * (*w)[k] + (*b)[k] : z;
    }
  }
  return y;
}

inline Vec ref_rms(const Vec& x, const Vec& w, int64_t n, int64_t c, double eps) {
  Vec y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double ms = 0;
    for (int64_t k = 0; k < c; ++k) ms += x[i * c + k] * x[i * c + k] / c;
    for (int64_t k = 0; k < c; ++k) y[i * c + k] = x[i * c + k] / std::sqrt(ms + eps) * w[k];
  }
  return y;
}

inline double ref_gelu(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }
inline double ref_silu(double x) { return x / (1 + std::exp(-x)); }

// q [b, lq, nh, d], k/v [b, lk, nh, d]
inline Vec ref_attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t lq, int64_t lk, int64_t nh,
                         int64_t d) {
  Vec out(q.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < nh; ++n)
      for (int64_t i = 0; i < lq; ++i) {
        Vec s(static_cast<size_t>(lk));
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j < lk; ++j) {
          double acc = 0;
          for (int64_t c = 0; c < d; ++c)
            acc += q[((b * lq + i) * nh + n) * d + c] * k[((b * lk + j) * nh + n) * d + c];
          s[j] = acc / std::sqrt(double(d));
          mx = std::max(mx, s[j]);
        }
        for (auto& z : s) sum += (z = std::exp(z - mx));
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < lk; ++j) acc += s[j] / sum * v[((b * lk + j) * nh + n) * d + c];
          out[((b * lq + i) * nh + n) * d + c] = acc;
        }
      }
  return out;
}

// --- Local self-attention (docs/attention.md) on q, k, v [B, f*h*w, nh, d], tokens (t, h, w) with w fastest.

// Video Swin's (rolled window, region) of coordinate x on one axis of extent E, as its code does it: the window
// clipped to the video (k' = min(k, E), no shift then), the axis padded to Ep = a multiple of k', rolled by -s,
// and labelled by the slices (-k'), (-k', -s), (-s, None) of compute_mask. Two tokens attend iff all three match.
inline std::pair<int64_t, int64_t> ref_swin_cell(int64_t x, int64_t E, int64_t k, bool shifted) {
  const int64_t kk = std::min(k, E), s = (shifted && k < E) ? kk / 2 : 0, Ep = (E + kk - 1) / kk * kk;
  const int64_t r = ((x - s) % Ep + Ep) % Ep;  // position after torch.roll(x, -s)
  const int64_t region = s == 0 ? 0 : (r < Ep - kk ? 0 : (r < Ep - s ? 1 : 2));
  return {r / kk, region};
}

// Brute-force masked dense attention over the real tokens (padding never attends).
inline Vec ref_window_attention(const Vec& q, const Vec& k, const Vec& v, int64_t B, int64_t f, int64_t h, int64_t w,
                                int64_t nh, int64_t d, const std::array<int64_t, 3>& win, bool shifted) {
  const int64_t L = f * h * w, ext[3] = {f, h, w};
  auto coords = [&](int64_t t) { return std::array<int64_t, 3>{t / (h * w), (t / w) % h, t % w}; };
  Vec out(q.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = 0; n < nh; ++n)
      for (int64_t i = 0; i < L; ++i) {
        Vec s(size_t(L), -INFINITY);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < L; ++j) {
          bool same = true;
          for (int a = 0; a < 3; ++a)
            same = same && ref_swin_cell(coords(i)[a], ext[a], win[a], shifted) ==
                               ref_swin_cell(coords(j)[a], ext[a], win[a], shifted);
          if (!same) continue;
          double acc = 0;
          for (int64_t c = 0; c < d; ++c) acc += q[((b * L + i) * nh + n) * d + c] * k[((b * L + j) * nh + n) * d + c];
          s[j] = acc / std::sqrt(double(d));
          mx = std::max(mx, s[j]);
        }
        for (auto& z : s) sum += (z = std::exp(z - mx));
        for (int64_t c = 0; c < d; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j) acc += s[j] / sum * v[((b * L + j) * nh + n) * d + c];
          out[((b * L + i) * nh + n) * d + c] = acc;
        }
      }
  return out;
}

// DSA with offsets [B, L, G, P, 3]: every slot sampled by explicit trilinear interpolation over its 8 corners,
// softmax over all P slots with the invalid ones at -inf.
inline Vec ref_dsa(const Vec& q, const Vec& k, const Vec& v, const Vec& off, int64_t B, int64_t f, int64_t h, int64_t w,
                   int64_t nh, int64_t d, const std::array<int64_t, 3>& win, int64_t G) {
  const int64_t L = f * h * w, P = win[0] * win[1] * win[2], ext[3] = {f, h, w};
  Vec out(q.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i)
      for (int64_t n = 0; n < nh; ++n) {
        const int64_t g = n / (nh / G), idx[3] = {i / (h * w), (i / w) % h, i % w};
        Vec logit(size_t(P), -INFINITY), vs(size_t(P * d), 0.0);  // scores, sampled values [P, d]
        for (int64_t p = 0; p < P; ++p) {
          const int64_t j[3] = {p / (win[1] * win[2]), (p / win[2]) % win[1], p % win[2]};
          bool valid = true;
          int64_t lo[3], hi[3];
          double fr[3];
          for (int a = 0; a < 3; ++a) {
            const int64_t kk = std::min(win[a], ext[a]), start = std::clamp(idx[a] - kk / 2, int64_t(0), ext[a] - kk);
            valid = valid && j[a] < kk;
            const double pos = std::clamp(double(start + j[a]) + off[(((b * L + i) * G + g) * P + p) * 3 + a], 0.0,
                                          double(ext[a] - 1));
            lo[a] = int64_t(std::floor(pos));
            hi[a] = std::min(lo[a] + 1, ext[a] - 1);
            fr[a] = pos - double(lo[a]);
          }
          if (!valid) continue;
          Vec ks(size_t(d), 0.0);
          for (int corner = 0; corner < 8; ++corner) {
            const int c[3] = {corner >> 2, (corner >> 1) & 1, corner & 1};
            double wt = 1;
            int64_t at[3];
            for (int a = 0; a < 3; ++a) {
              wt *= c[a] ? fr[a] : 1 - fr[a];
              at[a] = c[a] ? hi[a] : lo[a];
            }
            const int64_t row = ((b * L + (at[0] * h + at[1]) * w + at[2]) * nh + n) * d;
            for (int64_t e = 0; e < d; ++e) {
              ks[e] += wt * k[row + e];
              vs[p * d + e] += wt * v[row + e];
            }
          }
          double acc = 0;
          for (int64_t e = 0; e < d; ++e) acc += q[((b * L + i) * nh + n) * d + e] * ks[e];
          logit[p] = acc / std::sqrt(double(d));
        }
        double mx = -INFINITY, sum = 0;
        for (double z : logit) mx = std::max(mx, z);
        for (auto& z : logit) sum += (z = std::exp(z - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t p = 0; p < P; ++p) acc += logit[p] / sum * vs[p * d + e];
          out[((b * L + i) * nh + n) * d + e] = acc;
        }
      }
  return out;
}

// DSA's offset network of block prefix p on xn [B, L, D]: range * tanh(offset_proj(GELU(DWConv3d(xn)))), zero
// padding; returns offsets [B, L, G*P*3].
inline Vec ref_dsa_offsets(const ModelConfig& cfg, const Weights& W, const std::string& p, const Vec& xn, int64_t B,
                           int64_t f, int64_t h, int64_t w) {
  const int64_t D = cfg.dim, L = f * h * w, M = cfg.groups() * cfg.attention.slots() * 3;
  const Vec &cw = W.at(p + "self_attn.offset_conv.weight"), &cb = W.at(p + "self_attn.offset_conv.bias");
  Vec u(size_t(B * L * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < f; ++t)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          for (int64_t c = 0; c < D; ++c) {
            double s = cb[c];
            for (int64_t a = 0; a < 3; ++a)
              for (int64_t e = 0; e < 3; ++e)
                for (int64_t g = 0; g < 3; ++g) {
                  const int64_t tt = t + a - 1, yy = y + e - 1, xx = x + g - 1;
                  if (tt < 0 || tt >= f || yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                  s += cw[c * 27 + (a * 3 + e) * 3 + g] * xn[(b * L + (tt * h + yy) * w + xx) * D + c];
                }
            u[(b * L + (t * h + y) * w + x) * D + c] = ref_gelu(s);
          }
  Vec off = ref_linear(W, p + "self_attn.offset_proj", u, B * L, D, M);
  for (size_t i = 0; i < off.size(); ++i) off[i] = cfg.attention.offset_range[i % 3] * std::tanh(off[i]);
  return off;
}

// x [B, f*h*w, nh, d] rotated in place as complex pairs.
inline void ref_rope(Vec& x, int64_t B, int64_t f, int64_t h, int64_t w, int64_t nh, int64_t d) {
  const int64_t c = d / 2, parts[3] = {c - 2 * (c / 3), c / 3, c / 3};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < f * h * w; ++t) {
      const int64_t pos[3] = {t / (h * w), (t / w) % h, t % w};
      for (int64_t n = 0; n < nh; ++n) {
        int64_t pair = 0;
        for (int ax = 0; ax < 3; ++ax)
          for (int64_t i = 0; i < parts[ax]; ++i, ++pair) {
            double freq = std::pow(10000.0, -double(2 * i) / double(2 * parts[ax]));
            std::complex<double> z(x[((b * f * h * w + t) * nh + n) * d + 2 * pair],
                                   x[((b * f * h * w + t) * nh + n) * d + 2 * pair + 1]);
            z *= std::polar(1.0, double(pos[ax]) * freq);
            x[((b * f * h * w + t) * nh + n) * d + 2 * pair] = z.real();
            x[((b * f * h * w + t) * nh + n) * d + 2 * pair + 1] = z.imag();
          }
      }
    }
}

// latents [B, C, F, H, W], t [B] or [B, L] (Wan2.2's per-token timesteps: e [B, L, D], e0 [B, L, 6, D]),
// ctx [B, Lc, text_dim] -> velocity [B, out_dim, F, H, W].
inline Vec ref_forward(const ModelConfig& cfg, const Weights& W, const Vec& lat, const Vec& tstep, const Vec& context,
                       int64_t B, int64_t F, int64_t H, int64_t Wd, int64_t Lc) {
  const int64_t D = cfg.dim, C = cfg.in_dim, pt = cfg.patch_size[0], ph = cfg.patch_size[1], pw = cfg.patch_size[2];
  const int64_t f = F / pt, h = H / ph, w = Wd / pw, L = f * h * w, nh = cfg.num_heads, hd = D / nh, Lt = cfg.text_len;
  const double eps = cfg.eps;
  // direct strided Conv3d
  Vec x(size_t(B * L * D));
  const Vec &pwt = W.at("patch_embedding.weight"), &pb = W.at("patch_embedding.bias");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t o = 0; o < D; ++o) {
        double s = pb[o];
        const int64_t tf = l / (h * w), th = (l / w) % h, tw = l % w;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t a = 0; a < pt; ++a)
            for (int64_t e = 0; e < ph; ++e)
              for (int64_t g = 0; g < pw; ++g)
                s += pwt[(((o * C + c) * pt + a) * ph + e) * pw + g] *
                     lat[(((b * C + c) * F + tf * pt + a) * H + th * ph + e) * Wd + tw * pw + g];
        x[(b * L + l) * D + o] = s;
      }
  // time, one embedding per token (t [B] expanded to [B, L] as Wan2.2's model.py does)
  const int64_t half = cfg.freq_dim / 2, N = B * L;
  const bool per_token = int64_t(tstep.size()) == N;
  Vec sinus(size_t(N * cfg.freq_dim));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < half; ++i) {
      double a = tstep[size_t(per_token ? n : n / L)] * std::pow(10000.0, -double(i) / double(half));
      sinus[n * cfg.freq_dim + i] = std::cos(a);
      sinus[n * cfg.freq_dim + half + i] = std::sin(a);
    }
  Vec e = ref_linear(W, "time_embedding.0", sinus, N, cfg.freq_dim, D);
  for (auto& z : e) z = ref_silu(z);
  e = ref_linear(W, "time_embedding.2", e, N, D, D);
  Vec es = e;
  for (auto& z : es) z = ref_silu(z);
  Vec e0 = ref_linear(W, "time_projection.1", es, N, D, 6 * D);  // [B, L, 6, D]
  // text
  Vec ctx(size_t(B * Lt * cfg.text_dim), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Lc * cfg.text_dim; ++i) ctx[b * Lt * cfg.text_dim + i] = context[b * Lc * cfg.text_dim + i];
  ctx = ref_linear(W, "text_embedding.0", ctx, B * Lt, cfg.text_dim, D);
  for (auto& z : ctx) z = ref_gelu(z);
  ctx = ref_linear(W, "text_embedding.2", ctx, B * Lt, D, D);
  for (int64_t blk = 0; blk < cfg.num_layers; ++blk) {
    const std::string p = "blocks." + std::to_string(blk) + ".";
    const Vec& mod = W.at(p + "modulation");
    auto m = [&](int64_t b, int64_t l, int64_t i, int64_t k) { return mod[i * D + k] + e0[((b * L + l) * 6 + i) * D + k]; };
    Vec xn = ref_layernorm(x, N, D, eps);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t k = 0; k < D; ++k) {
          double& z = xn[(b * L + l) * D + k];
          z = z * (1 + m(b, l, 1, k)) + m(b, l, 0, k);
        }
    Vec q = ref_rms(ref_linear(W, p + "self_attn.q", xn, N, D, D), W.at(p + "self_attn.norm_q.weight"), N, D, eps);
    Vec k = ref_rms(ref_linear(W, p + "self_attn.k", xn, N, D, D), W.at(p + "self_attn.norm_k.weight"), N, D, eps);
    Vec v = ref_linear(W, p + "self_attn.v", xn, N, D, D);
    ref_rope(q, B, f, h, w, nh, hd);
    ref_rope(k, B, f, h, w, nh, hd);
    const auto& at = cfg.attention;
    Vec att;
    if (at.type == AttentionType::dense) {
      att = ref_attention(q, k, v, B, L, L, nh, hd);
    } else if (at.type == AttentionType::window) {
      att = ref_window_attention(q, k, v, B, f, h, w, nh, hd, at.window, at.shift && blk % 2 == 1);
    } else {  // dsa_fixed: offsets 0
      const Vec off = at.has_offsets() ? ref_dsa_offsets(cfg, W, p, xn, B, f, h, w)
                                       : Vec(size_t(N * cfg.groups() * at.slots() * 3), 0.0);
      att = ref_dsa(q, k, v, off, B, f, h, w, nh, hd, at.window, cfg.groups());
    }
    Vec y = ref_linear(W, p + "self_attn.o", att, N, D, D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t kk = 0; kk < D; ++kk) x[(b * L + l) * D + kk] += y[(b * L + l) * D + kk] * m(b, l, 2, kk);
    Vec xc = ref_layernorm(x, N, D, eps, &W.at(p + "norm3.weight"), &W.at(p + "norm3.bias"));
    Vec qc = ref_rms(ref_linear(W, p + "cross_attn.q", xc, N, D, D), W.at(p + "cross_attn.norm_q.weight"), N, D, eps);
    Vec kc = ref_rms(ref_linear(W, p + "cross_attn.k", ctx, B * Lt, D, D), W.at(p + "cross_attn.norm_k.weight"), B * Lt,
                     D, eps);
    Vec vc = ref_linear(W, p + "cross_attn.v", ctx, B * Lt, D, D);
    Vec yc = ref_linear(W, p + "cross_attn.o", ref_attention(qc, kc, vc, B, L, Lt, nh, hd), N, D, D);
    for (size_t i = 0; i < x.size(); ++i) x[i] += yc[i];
    Vec xf = ref_layernorm(x, N, D, eps);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t kk = 0; kk < D; ++kk) {
          double& z = xf[(b * L + l) * D + kk];
          z = z * (1 + m(b, l, 4, kk)) + m(b, l, 3, kk);
        }
    Vec hdn = ref_linear(W, p + "ffn.0", xf, N, D, cfg.ffn_dim);
    for (auto& z : hdn) z = ref_gelu(z);
    Vec fo = ref_linear(W, p + "ffn.2", hdn, N, cfg.ffn_dim, D);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t kk = 0; kk < D; ++kk) x[(b * L + l) * D + kk] += fo[(b * L + l) * D + kk] * m(b, l, 5, kk);
  }
  // head
  const Vec& hm = W.at("head.modulation");
  Vec xh = ref_layernorm(x, B * L, D, eps);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t k = 0; k < D; ++k) {
        double& z = xh[(b * L + l) * D + k];
        z = z * (1 + hm[D + k] + e[(b * L + l) * D + k]) + hm[k] + e[(b * L + l) * D + k];
      }
  const int64_t Co = cfg.out_dim;
  Vec tok = ref_linear(W, "head.head", xh, B * L, D, Co * pt * ph * pw);
  Vec out(size_t(B * Co * F * H * Wd));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t a = 0; a < pt; ++a)
        for (int64_t e2 = 0; e2 < ph; ++e2)
          for (int64_t g = 0; g < pw; ++g)
            for (int64_t c = 0; c < Co; ++c) {
              const int64_t tf = l / (h * w), th = (l / w) % h, tw = l % w;
              out[(((b * Co + c) * F + tf * pt + a) * H + th * ph + e2) * Wd + tw * pw + g] =
                  tok[(b * L + l) * Co * pt * ph * pw + ((a * ph + e2) * pw + g) * Co + c];
            }
  return out;
}

}  // namespace ms::test
