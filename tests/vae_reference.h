// The video VAEs in float64 plain loops, the tests' independent reference: every layer written from Wan's semantics
// as one pass over the whole clip (explicit zero padding, the upsampling materialised, no chunks, no caches), so the
// engine's chunked, cached result must equal it. Wan2.1's walks the engine's layer list; Wan2.2's is written from
// vae2_2.py's modules. Layout [C, T, H, W] per clip.
#pragma once
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/vae_weights.h"
#include "ops/conv3d.h"

namespace ms::test {

// The contract of ops/conv3d.h in plain loops.
inline std::vector<double> naive_conv_frame(const std::vector<const double*>& x, const std::vector<double>& w,
                                            const std::vector<double>& b, const ConvFrameDims& d) {
  std::vector<double> y(size_t(d.co * d.out_h * d.out_w));
  for (int64_t o = 0; o < d.co; ++o)
    for (int64_t i = 0; i < d.out_h; ++i)
      for (int64_t j = 0; j < d.out_w; ++j) {
        double acc = b[size_t(o)];
        for (int64_t c = 0; c < d.ci; ++c)
          for (int64_t a = 0; a < d.kt; ++a)
            for (int64_t e = 0; e < d.kh; ++e)
              for (int64_t f = 0; f < d.kw; ++f) {
                const int64_t r = i * d.stride + e - d.pad_top, s = j * d.stride + f - d.pad_left;
                if (!x[size_t(a)] || r < 0 || s < 0 || r >= d.up * d.h || s >= d.up * d.w) continue;
                acc += w[size_t((((o * d.ci + c) * d.kt + a) * d.kh + e) * d.kw + f)] *
                       x[size_t(a)][(c * d.h + r / d.up) * d.w + s / d.up];
              }
        y[size_t((o * d.out_h + i) * d.out_w + j)] = acc;
      }
  return y;
}

struct Vid {
  int64_t c = 0, t = 0, h = 0, w = 0;
  std::vector<double> v;
  Vid() = default;
  Vid(int64_t c_, int64_t t_, int64_t h_, int64_t w_) : c(c_), t(t_), h(h_), w(w_), v(size_t(c_ * t_ * h_ * w_)) {}
  double& at(int64_t ci, int64_t ti, int64_t hi, int64_t wi) { return v[size_t(((ci * t + ti) * h + hi) * w + wi)]; }
  double at(int64_t ci, int64_t ti, int64_t hi, int64_t wi) const {
    return v[size_t(((ci * t + ti) * h + hi) * w + wi)];
  }
  const double* ptr(int64_t ci, int64_t ti) const { return v.data() + (ci * t + ti) * h * w; }  // one plane
};

class VaeReference {
 public:
  explicit VaeReference(const VaeWeights& w) : w_(w), c_(w.config()) {}

  // video [3, F, H, W] -> normalised latent mean [z, 1 + (F - 1) / 4, H / s, W / s] (s: 8, or Wan2.2's 16).
  Vid encode(const Vid& video) const {
    Vid x = video;
    if (c_.is_residual)
      x = encoder22(patchify(video));
    else
      for (const auto& l : vae_encoder_layers(c_)) x = layer(l, x);
    const Vid mu = conv_valid(x, "conv1", c_.z_dim, 1, 1, 1, 1, 1);  // first z output channels
    Vid out = mu;
    for (int64_t k = 0; k < mu.c; ++k)
      for (int64_t i = 0; i < mu.t * mu.h * mu.w; ++i) {
        double& y = out.v[size_t(k * mu.t * mu.h * mu.w + i)];
        y = (y - double(c_.latents_mean[size_t(k)])) / double(c_.latents_std[size_t(k)]);
      }
    return out;
  }

  // latents [z, T, h, w] -> video [3, 1 + 4 (T - 1), s h, s w], clamped when clamp.
  Vid decode(const Vid& latents, bool clamp = true) const {
    Vid z = latents;
    for (int64_t k = 0; k < z.c; ++k)
      for (int64_t i = 0; i < z.t * z.h * z.w; ++i) {
        double& y = z.v[size_t(k * z.t * z.h * z.w + i)];
        y = y * double(c_.latents_std[size_t(k)]) + double(c_.latents_mean[size_t(k)]);
      }
    Vid x = conv_valid(z, "conv2", c_.z_dim, 1, 1, 1, 1, 1);
    if (c_.is_residual)
      x = unpatchify(decoder22(x));
    else
      for (const auto& l : vae_decoder_layers(c_)) x = layer(l, x);
    if (clamp)
      for (double& y : x.v) y = std::clamp(y, -1.0, 1.0);
    return x;
  }

  // Zero padding: `front` frames before, and rows / columns on each side.
  static Vid pad(const Vid& x, int64_t front, int64_t top, int64_t bottom, int64_t left, int64_t right) {
    Vid y(x.c, x.t + front, x.h + top + bottom, x.w + left + right);
    for (int64_t c = 0; c < x.c; ++c)
      for (int64_t t = 0; t < x.t; ++t)
        for (int64_t h = 0; h < x.h; ++h)
          for (int64_t w = 0; w < x.w; ++w) y.at(c, t + front, h + top, w + left) = x.at(c, t, h, w);
    return y;
  }

  // Unpadded cross-correlation with kernel [co, ci, kt, kh, kw] of `name` (its first co output channels), strides in
  // time and space.
  Vid conv_valid(const Vid& x, const std::string& name, int64_t co, int64_t kt, int64_t kh, int64_t kw,
                 int64_t stride_t, int64_t stride_s) const {
    const float* wt = w_.get(name + ".weight");
    const float* b = w_.get(name + ".bias");
    Vid y(co, (x.t - kt) / stride_t + 1, (x.h - kh) / stride_s + 1, (x.w - kw) / stride_s + 1);
    for (int64_t o = 0; o < co; ++o)
      for (int64_t t = 0; t < y.t; ++t)
        for (int64_t i = 0; i < y.h; ++i)
          for (int64_t j = 0; j < y.w; ++j) {
            double acc = b[o];
            for (int64_t c = 0; c < x.c; ++c)
              for (int64_t a = 0; a < kt; ++a)
                for (int64_t e = 0; e < kh; ++e)
                  for (int64_t f = 0; f < kw; ++f)
                    acc += double(wt[(((o * x.c + c) * kt + a) * kh + e) * kw + f]) *
                           x.at(c, t * stride_t + a, i * stride_s + e, j * stride_s + f);
            y.at(o, t, i, j) = acc;
          }
    return y;
  }

 private:
  Vid causal3(const Vid& x, const std::string& name, int64_t co) const {  // 3x3x3, 2 zero frames in front
    return conv_valid(pad(x, 2, 1, 1, 1, 1), name, co, 3, 3, 3, 1, 1);
  }

  Vid rms(const Vid& x, const std::string& gamma, bool silu) const {
    const float* g = w_.get(gamma);
    Vid y = x;
    for (int64_t t = 0; t < x.t; ++t)
      for (int64_t i = 0; i < x.h; ++i)
        for (int64_t j = 0; j < x.w; ++j) {
          double ss = 0;
          for (int64_t c = 0; c < x.c; ++c) ss += x.at(c, t, i, j) * x.at(c, t, i, j);
          const double scale = std::sqrt(double(x.c)) / std::max(std::sqrt(ss), 1e-12);
          for (int64_t c = 0; c < x.c; ++c) {
            const double v = x.at(c, t, i, j) * scale * g[c];
            y.at(c, t, i, j) = silu ? v / (1 + std::exp(-v)) : v;
          }
        }
    return y;
  }

  static void add(Vid& y, const Vid& x) {
    for (size_t i = 0; i < y.v.size(); ++i) y.v[i] += x.v[i];
  }

  Vid residual(const VaeLayer& l, const Vid& x) const {
    Vid h = causal3(rms(x, l.prefix + ".residual.0.gamma", true), l.prefix + ".residual.2", l.co);
    h = causal3(rms(h, l.prefix + ".residual.3.gamma", true), l.prefix + ".residual.6", l.co);
    add(h, l.ci != l.co ? conv_valid(x, l.prefix + ".shortcut", l.co, 1, 1, 1, 1, 1) : x);
    return h;
  }

  Vid attention(const VaeLayer& l, const Vid& x) const {
    const int64_t C = x.c, n = x.h * x.w;
    const Vid h = rms(x, l.prefix + ".norm.gamma", false);
    const float* wq = w_.get(l.prefix + ".to_qkv.weight");
    const float* bq = w_.get(l.prefix + ".to_qkv.bias");
    const float* wp = w_.get(l.prefix + ".proj.weight");
    const float* bp = w_.get(l.prefix + ".proj.bias");
    Vid y = x;
    for (int64_t t = 0; t < x.t; ++t) {
      std::vector<double> qkv(size_t(3 * C * n)), o(size_t(C * n));
      for (int64_t r = 0; r < 3 * C; ++r)
        for (int64_t p = 0; p < n; ++p) {
          double acc = bq[r];
          for (int64_t c = 0; c < C; ++c) acc += double(wq[r * C + c]) * h.at(c, t, p / x.w, p % x.w);
          qkv[size_t(r * n + p)] = acc;
        }
      for (int64_t p = 0; p < n; ++p) {
        std::vector<double> s(static_cast<size_t>(n));
        double m = -INFINITY, sum = 0;
        for (int64_t q = 0; q < n; ++q) {
          double d = 0;
          for (int64_t c = 0; c < C; ++c) d += qkv[size_t(c * n + p)] * qkv[size_t((C + c) * n + q)];
          s[size_t(q)] = d / std::sqrt(double(C));
          m = std::max(m, s[size_t(q)]);
        }
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int64_t c = 0; c < C; ++c) {
          double acc = 0;
          for (int64_t q = 0; q < n; ++q) acc += s[size_t(q)] / sum * qkv[size_t((2 * C + c) * n + q)];
          o[size_t(c * n + p)] = acc;
        }
      }
      for (int64_t c = 0; c < C; ++c)
        for (int64_t p = 0; p < n; ++p) {
          double acc = bp[c];
          for (int64_t k = 0; k < C; ++k) acc += double(wp[c * C + k]) * o[size_t(k * n + p)];
          y.at(c, t, p / x.w, p % x.w) += acc;
        }
    }
    return y;
  }

  // Frames [from, from + count) of x.
  static Vid frames(const Vid& x, int64_t from, int64_t count) {
    Vid y(x.c, count, x.h, x.w);
    for (int64_t c = 0; c < x.c; ++c)
      for (int64_t t = 0; t < count; ++t) std::copy_n(x.ptr(c, from + t), x.h * x.w, &y.at(c, t, 0, 0));
    return y;
  }

  // a's frames, then b's.
  static Vid concat(const Vid& a, const Vid& b) {
    Vid y(a.c, a.t + b.t, a.h, a.w);
    for (int64_t c = 0; c < a.c; ++c) {
      std::copy_n(a.ptr(c, 0), a.t * a.h * a.w, &y.at(c, 0, 0, 0));
      if (b.t) std::copy_n(b.ptr(c, 0), b.t * b.h * b.w, &y.at(c, a.t, 0, 0));
    }
    return y;
  }

  // Spatial: pad right and bottom by one, 3x3 stride 2. Temporal: frame 0 passes, then windows (2j-2, 2j-1, 2j).
  Vid down(const VaeLayer& l, const Vid& x, bool temporal) const {
    Vid y = conv_valid(pad(x, 0, 0, 1, 0, 1), l.prefix + ".resample.1", l.co, 1, 3, 3, 1, 2);
    if (!temporal || y.t == 1) return y;
    return concat(frames(y, 0, 1), conv_valid(y, l.prefix + ".time_conv", y.c, 3, 1, 1, 2, 1));
  }

  // Temporal: frame 0 passes, frames 1.. through a causal (3,1,1) conv to 2C channels, each yielding two frames.
  // Spatial: nearest x2, then 3x3 with padding 1.
  Vid up(const VaeLayer& l, const Vid& x, bool temporal) const {
    Vid s = x;
    if (temporal && x.t > 1) {
      const Vid z =
          conv_valid(pad(frames(x, 1, x.t - 1), 2, 0, 0, 0, 0), l.prefix + ".time_conv", 2 * x.c, 3, 1, 1, 1, 1);
      Vid doubled(x.c, 2 * z.t, x.h, x.w);
      for (int64_t t = 0; t < z.t; ++t)
        for (int64_t half = 0; half < 2; ++half)
          for (int64_t c = 0; c < x.c; ++c)
            std::copy_n(z.ptr(half * x.c + c, t), x.h * x.w, &doubled.at(c, 2 * t + half, 0, 0));
      s = concat(frames(x, 0, 1), doubled);
    }
    Vid big(s.c, s.t, 2 * s.h, 2 * s.w);
    for (int64_t c = 0; c < s.c; ++c)
      for (int64_t t = 0; t < s.t; ++t)
        for (int64_t i = 0; i < big.h; ++i)
          for (int64_t j = 0; j < big.w; ++j) big.at(c, t, i, j) = s.at(c, t, i / 2, j / 2);
    return conv_valid(pad(big, 0, 1, 1, 1, 1), l.prefix + ".resample.1", l.co, 1, 3, 3, 1, 1);
  }

  Vid layer(const VaeLayer& l, const Vid& x) const {
    switch (l.kind) {
      case VaeLayerKind::conv:
        return causal3(x, l.prefix, l.co);
      case VaeLayerKind::res:
        return residual(l, x);
      case VaeLayerKind::attn:
        return attention(l, x);
      case VaeLayerKind::down2d:
        return down(l, x, false);
      case VaeLayerKind::down3d:
        return down(l, x, true);
      case VaeLayerKind::up2d:
        return up(l, x, false);
      case VaeLayerKind::up3d:
        return up(l, x, true);
      case VaeLayerKind::head:
        return causal3(rms(x, l.prefix + ".0.gamma", true), l.prefix + ".2", l.co);
      case VaeLayerKind::keep:  // Wan2.2's stages: encoder22 and decoder22 walk them
      case VaeLayerKind::avg_down:
      case VaeLayerKind::dup_up:
        break;
    }
    return x;
  }

  // Wan2.2 (vae2_2.py), written from its modules rather than from the engine's layer list: the encoder's
  // Down_ResidualBlocks and the decoder's Up_ResidualBlocks, each with its shortcut over the whole stage.
  Vid encoder22(Vid x) const {
    const int64_t S = int64_t(c_.dim_mult.size()), R = c_.num_res_blocks;
    x = causal3(x, "encoder.conv1", c_.dim);
    int64_t in = c_.dim;
    for (int64_t i = 0; i < S; ++i) {
      const std::string pre = "encoder.downsamples." + std::to_string(i) + ".downsamples.";
      const int64_t out = c_.dim * c_.dim_mult[size_t(i)];
      const bool down = i != S - 1, temporal = down && c_.temperal_downsample[size_t(i)];
      const Vid copy = x;
      for (int64_t j = 0; j < R; ++j) x = residual({VaeLayerKind::res, pre + std::to_string(j), j ? out : in, out}, x);
      if (down) x = this->down({VaeLayerKind::down2d, pre + std::to_string(R), out, out}, x, temporal);
      add(x, avg_down3d(copy, out, temporal ? 2 : 1, down ? 2 : 1));
      in = out;
    }
    x = residual({VaeLayerKind::res, "encoder.middle.0", in, in}, x);
    x = attention({VaeLayerKind::attn, "encoder.middle.1", in, in}, x);
    x = residual({VaeLayerKind::res, "encoder.middle.2", in, in}, x);
    return causal3(rms(x, "encoder.head.0.gamma", true), "encoder.head.2", 2 * c_.z_dim);
  }

  Vid decoder22(Vid x) const {
    const int64_t S = int64_t(c_.dim_mult.size()), R = c_.num_res_blocks, D = c_.decoder_dim();
    int64_t in = D * c_.dim_mult.back();
    x = causal3(x, "decoder.conv1", in);
    x = residual({VaeLayerKind::res, "decoder.middle.0", in, in}, x);
    x = attention({VaeLayerKind::attn, "decoder.middle.1", in, in}, x);
    x = residual({VaeLayerKind::res, "decoder.middle.2", in, in}, x);
    for (int64_t i = 0; i < S; ++i) {
      const std::string pre = "decoder.upsamples." + std::to_string(i) + ".upsamples.";
      const int64_t out = D * c_.dim_mult[size_t(S - 1 - i)];
      const bool up = i != S - 1, temporal = up && c_.temperal_downsample[size_t(S - 2 - i)];
      const Vid copy = x;
      for (int64_t j = 0; j <= R; ++j) x = residual({VaeLayerKind::res, pre + std::to_string(j), j ? out : in, out}, x);
      if (up) {
        x = this->up({VaeLayerKind::up2d, pre + std::to_string(R + 1), out, out}, x, temporal);
        add(x, dup_up3d(copy, out, temporal ? 2 : 1, 2));
      }
      in = out;
    }
    return causal3(rms(x, "decoder.head.0.gamma", true), "decoder.head.2", 12);
  }

 public:
  // AvgDown3D: zero frames in front up to a multiple of ft; channels c, then the (ft, fs, fs) offsets, flattened in
  // that order and averaged in groups down to co channels.
  static Vid avg_down3d(const Vid& x, int64_t co, int64_t ft, int64_t fs) {
    const Vid p = pad(x, (ft - x.t % ft) % ft, 0, 0, 0, 0);
    const int64_t factor = ft * fs * fs, g = x.c * factor / co;
    Vid y(co, p.t / ft, x.h / fs, x.w / fs);
    for (int64_t o = 0; o < co; ++o)
      for (int64_t t = 0; t < y.t; ++t)
        for (int64_t i = 0; i < y.h; ++i)
          for (int64_t j = 0; j < y.w; ++j) {
            double acc = 0;
            for (int64_t k = o * g; k < (o + 1) * g; ++k) {
              const int64_t c = k / factor, r = k % factor, a = r / (fs * fs), b = r / fs % fs, d = r % fs;
              acc += p.at(c, t * ft + a, i * fs + b, j * fs + d);
            }
            y.at(o, t, i, j) = acc / double(g);
          }
    return y;
  }

  // DupUp3D: each channel repeated co ft fs^2 / ci times, the copies spread over (co, ft, fs, fs); the first ft - 1
  // frames dropped (Wan's first chunk).
  static Vid dup_up3d(const Vid& x, int64_t co, int64_t ft, int64_t fs) {
    const int64_t r = co * ft * fs * fs / x.c;
    Vid y(co, x.t * ft - (ft - 1), x.h * fs, x.w * fs);
    for (int64_t o = 0; o < co; ++o)
      for (int64_t t = 0; t < x.t; ++t)
        for (int64_t a = 0; a < ft; ++a)
          for (int64_t h = 0; h < x.h; ++h)
            for (int64_t b = 0; b < fs; ++b)
              for (int64_t w = 0; w < x.w; ++w)
                for (int64_t d = 0; d < fs; ++d) {
                  const int64_t frame = t * ft + a - (ft - 1);
                  if (frame >= 0)
                    y.at(o, frame, h * fs + b, w * fs + d) = x.at((((o * ft + a) * fs + b) * fs + d) / r, t, h, w);
                }
    return y;
  }

 private:
  // Wan2.2's patchify: [3, F, H, W] -> [12, F, H / 2, W / 2], channel (c * 2 + column offset) * 2 + row offset.
  static Vid patchify(const Vid& v) {
    Vid y(12, v.t, v.h / 2, v.w / 2);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < v.t; ++t)
        for (int64_t i = 0; i < v.h; ++i)
          for (int64_t j = 0; j < v.w; ++j) y.at((c * 2 + j % 2) * 2 + i % 2, t, i / 2, j / 2) = v.at(c, t, i, j);
    return y;
  }

  static Vid unpatchify(const Vid& x) {
    Vid v(3, x.t, x.h * 2, x.w * 2);
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < v.t; ++t)
        for (int64_t i = 0; i < v.h; ++i)
          for (int64_t j = 0; j < v.w; ++j) v.at(c, t, i, j) = x.at((c * 2 + j % 2) * 2 + i % 2, t, i / 2, j / 2);
    return v;
  }

  const VaeWeights& w_;
  const VaeConfig& c_;
};

}  // namespace ms::test
