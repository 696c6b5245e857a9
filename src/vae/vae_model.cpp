#include "vae/vae_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cpu/vae_ops.h"
#include "core/check.h"
#include "core/units.h"
#include "ops/conv3d.h"
#include "runtime/vae_ops.h"

namespace ms {
namespace {

constexpr int64_t kCacheFrames = 2;  // a kernel-3 causal conv's left context, carried between chunks
constexpr int64_t kWanChunk = 4;     // frames per encoder chunk after frame 0 (Wan's)
constexpr int64_t kMinTile = 32;     // pixels: a quarter of it is the overlap, one latent at least

// The bytes of activations a pass holds at once: what each chunk adds while it lives, and the most at any time.
struct Ledger {
  int64_t live = 0, peak = 0;
  void add(int64_t bytes) {
    live += bytes;
    peak = std::max(peak, live);
  }
};

// One chunk's frames, channels-first per frame: [t, c, h, w], in the pass's ops' memory. Without data in a dry pass
// (FLOPs and bytes only).
struct Frames {
  int64_t t = 0, c = 0, h = 0, w = 0;
  float* data = nullptr;

  Frames() = default;
  Frames(int64_t t_, int64_t c_, int64_t h_, int64_t w_, VaeOps* ops, Ledger* ledger)
      : t(t_), c(c_), h(h_), w(w_), ops_(ops), ledger_(ledger) {
    if (ops_) data = ops_->alloc(size());
    ledger_->add(bytes());
  }
  Frames(Frames&& o) noexcept
      : t(o.t),
        c(o.c),
        h(o.h),
        w(o.w),
        data(std::exchange(o.data, nullptr)),
        ops_(o.ops_),
        ledger_(std::exchange(o.ledger_, nullptr)) {}
  Frames& operator=(Frames&& o) noexcept {
    if (this != &o) {
      release();
      t = o.t, c = o.c, h = o.h, w = o.w;
      data = std::exchange(o.data, nullptr);
      ops_ = o.ops_;
      ledger_ = std::exchange(o.ledger_, nullptr);
    }
    return *this;
  }
  Frames(const Frames&) = delete;
  Frames& operator=(const Frames&) = delete;
  ~Frames() { release(); }

  int64_t size() const { return t * c * h * w; }
  int64_t bytes() const { return size() * int64_t(sizeof(float)); }
  int64_t plane() const { return h * w; }
  int64_t frame_size() const { return c * h * w; }
  float* frame(int64_t i) { return data ? data + i * frame_size() : nullptr; }
  const float* frame(int64_t i) const { return data ? data + i * frame_size() : nullptr; }

 private:
  void release() {
    if (data) ops_->release(data);
    data = nullptr;
    if (ledger_) ledger_->live -= bytes();
    ledger_ = nullptr;
  }
  VaeOps* ops_ = nullptr;
  Ledger* ledger_ = nullptr;  // charged with this chunk's bytes while it lives
};

// What a pass cost: its FLOPs and the most bytes of activations it held at once.
struct PassCost {
  double flops = 0;
  int64_t peak_bytes = 0;
};

// One encode or decode call: the ops that hold the weights and compute (null: a dry pass that only counts FLOPs and
// bytes), the state carried from chunk to chunk, the FLOPs done.
class Pass {
 public:
  Pass(const VaeConfig& c, VaeOps* ops) : config(c), ops(ops) {}

  const VaeConfig& config;
  Ledger ledger;                       // declared before the tails it is charged by
  std::map<std::string, Frames> tail;  // each causal conv's last <= 2 input frames; each time downsampler's last
  std::set<std::string> started;       // the time upsamplers and Wan2.2's DupUp3D past the stream's first chunk
  double flops = 0;
  VaeOps* const ops;

  bool dry() const { return !ops; }
  const float* param(const std::string& name) const { return ops ? ops->param(name) : nullptr; }
  Frames make(int64_t t, int64_t c, int64_t h, int64_t w) { return Frames(t, c, h, w, ops, &ledger); }
  // Scratch of `bytes` held for a moment on top of what lives.
  void spike(int64_t bytes) { ledger.peak = std::max(ledger.peak, ledger.live + bytes); }
  // The convolutions' unfolded band lives on (a per-thread buffer at its largest size) beside the activations.
  PassCost cost() const { return {flops, ledger.peak + scratch}; }
  int64_t scratch = 0;

  // One output frame of a convolution (ops/conv3d.h) from d.kt input frames.
  void conv(const ConvFrameParams<float>& c) {
    flops += c.d.flops();
    scratch = std::max(scratch, cpu::conv3d_col_bytes(c.d));
    if (!dry()) ops->conv(c);
  }
};

// x through Wan's channel RMS norm (gamma = name) and, when silu, SiLU; into a new chunk.
Frames norm(Pass& p, const Frames& x, const std::string& gamma, bool silu) {
  Frames y = p.make(x.t, x.c, x.h, x.w);
  if (!p.dry())
    for (int64_t i = 0; i < x.t; ++i)
      p.ops->channel_rms_norm(
          {.x = x.frame(i), .gamma = p.param(gamma), .y = y.frame(i), .C = x.c, .N = x.plane(), .silu = silu});
  return y;
}

// A 3D conv of kernel (3, k, k), zero padding k/2 in space, causal in time: each output frame sees its own and the
// two frames before it, taken from the tail carried since the previous chunk, or zeros at the stream's start.
Frames causal_conv(Pass& p, const std::string& name, const Frames& x, int64_t co, int64_t k) {
  Frames& tail = p.tail[name];
  auto frame = [&](int64_t s) -> const float* {  // frame s of x, s < 0 reaching into the tail
    return s >= 0 ? x.frame(s) : s >= -tail.t ? tail.frame(tail.t + s) : nullptr;
  };
  Frames y = p.make(x.t, co, x.h, x.w);
  const ConvFrameDims d{.ci = x.c,
                        .co = co,
                        .kt = kCacheFrames + 1,
                        .kh = k,
                        .kw = k,
                        .h = x.h,
                        .w = x.w,
                        .pad_top = k / 2,
                        .pad_left = k / 2,
                        .out_h = x.h,
                        .out_w = x.w};
  for (int64_t t = 0; t < x.t; ++t) {
    const float* in[kCacheFrames + 1] = {frame(t - 2), frame(t - 1), frame(t)};
    p.conv({.x = in, .w = p.param(name + ".weight"), .b = p.param(name + ".bias"), .y = y.frame(t), .d = d});
  }
  Frames next = p.make(std::min(kCacheFrames, tail.t + x.t), x.c, x.h, x.w);
  if (!p.dry())
    for (int64_t i = 0; i < next.t; ++i) p.ops->copy(next.frame(i), frame(x.t - next.t + i), x.frame_size());
  tail = std::move(next);
  return y;
}

// A 1x1x1 conv of every frame to co channels (the first co output rows of the weight when it has more).
Frames pointwise(Pass& p, const float* weight, const float* bias, const Frames& x, int64_t co) {
  Frames y = p.make(x.t, co, x.h, x.w);
  const ConvFrameDims d{.ci = x.c, .co = co, .h = x.h, .w = x.w, .out_h = x.h, .out_w = x.w};
  for (int64_t t = 0; t < x.t; ++t) {
    const float* in = x.frame(t);
    p.conv({.x = &in, .w = weight, .b = bias, .y = y.frame(t), .d = d});
  }
  return y;
}

void add_into(Pass& p, Frames& y, const Frames& x) {
  if (!p.dry()) p.ops->add(y.data, x.data, y.size());
}

// RMS, SiLU, causal conv, RMS, SiLU, causal conv, plus x (through a 1x1x1 conv when the width changes).
Frames residual(Pass& p, const std::string& pre, const Frames& x, int64_t co) {
  Frames h = causal_conv(p, pre + ".residual.2", norm(p, x, pre + ".residual.0.gamma", true), co, 3);
  h = causal_conv(p, pre + ".residual.6", norm(p, h, pre + ".residual.3.gamma", true), co, 3);
  if (x.c != co)
    add_into(p, h, pointwise(p, p.param(pre + ".shortcut.weight"), p.param(pre + ".shortcut.bias"), x, co));
  else
    add_into(p, h, x);
  return h;
}

// One-head attention among the pixels of each frame (VaeOps::attention) after the RMS norm.
Frames attention(Pass& p, const std::string& pre, const Frames& x) {
  const int64_t C = x.c, n = x.plane();
  Frames y = p.make(x.t, C, x.h, x.w);
  p.flops += double(x.t) * (2.0 * 4 * C * C * n + 4.0 * C * n * n);
  // The normed chunk, q k v, the output and one block of scores.
  p.spike(int64_t(sizeof(float)) * (x.t * C * n + 4 * C * n + std::min(n, kVaeQueryBlock) * n));
  if (p.dry()) return y;
  const Frames h = norm(p, x, pre + ".norm.gamma", false);
  for (int64_t t = 0; t < x.t; ++t)
    p.ops->attention({.h = h.frame(t),
                      .x = x.frame(t),
                      .w_qkv = p.param(pre + ".to_qkv.weight"),
                      .b_qkv = p.param(pre + ".to_qkv.bias"),
                      .w_proj = p.param(pre + ".proj.weight"),
                      .b_proj = p.param(pre + ".proj.bias"),
                      .y = y.frame(t),
                      .C = C,
                      .N = n});
  return y;
}

// Halves each frame (zero pad one column right and one row below, 3x3 conv, stride 2); the time downsampler then
// halves the frames: frame 0 of the stream passes, afterwards out[j] = conv(y[2j - 2], y[2j - 1], y[2j]) over the
// stream, stride 2 and no padding, the last frame of each chunk carried to the next.
Frames downsample(Pass& p, const std::string& pre, const Frames& x, int64_t co, bool temporal) {
  const ConvFrameDims d{.ci = x.c,
                        .co = co,
                        .kh = 3,
                        .kw = 3,
                        .h = x.h,
                        .w = x.w,
                        .stride = 2,
                        .out_h = conv_out_size(x.h, 3, 2, 0, 1),
                        .out_w = conv_out_size(x.w, 3, 2, 0, 1)};
  Frames y = p.make(x.t, co, d.out_h, d.out_w);
  for (int64_t t = 0; t < x.t; ++t) {
    const float* in = x.frame(t);
    p.conv({.x = &in,
            .w = p.param(pre + ".resample.1.weight"),
            .b = p.param(pre + ".resample.1.bias"),
            .y = y.frame(t),
            .d = d});
  }
  if (!temporal) return y;
  const std::string key = pre + ".time_conv";
  Frames last = p.make(1, y.c, y.h, y.w);
  if (!p.dry()) p.ops->copy(last.frame(0), y.frame(y.t - 1), y.frame_size());
  Frames prev = std::move(p.tail[key]);
  p.tail[key] = std::move(last);
  if (prev.t == 0) return y;  // the stream's first chunk passes
  MS_CHECK(y.t % 2 == 0, "time downsampler fed an odd chunk of ", y.t, " frames");
  Frames z = p.make(y.t / 2, y.c, y.h, y.w);
  const ConvFrameDims dt{.ci = y.c, .co = y.c, .kt = 3, .h = y.h, .w = y.w, .out_h = y.h, .out_w = y.w};
  auto frame = [&](int64_t s) -> const float* { return s == 0 ? prev.frame(0) : y.frame(s - 1); };  // [prev, y]
  for (int64_t j = 0; j < z.t; ++j) {
    const float* in[3] = {frame(2 * j), frame(2 * j + 1), frame(2 * j + 2)};
    p.conv({.x = in, .w = p.param(key + ".weight"), .b = p.param(key + ".bias"), .y = z.frame(j), .d = dt});
  }
  return z;
}

// The time upsampler doubles the frames: frame 0 of the stream passes; the later frames form their own causal
// stream through a (3, 1, 1) conv to 2C channels, channels [0, C) the earlier and [C, 2C) the later of the two
// frames each yields. Then each frame is doubled (nearest) and convolved 3x3, padding 1, to co channels.
Frames upsample(Pass& p, const std::string& pre, Frames x, int64_t co, bool temporal) {
  const std::string key = pre + ".time_conv";
  if (temporal && !p.started.insert(key).second) {
    const Frames y = causal_conv(p, key, x, 2 * x.c, 1);
    Frames z = p.make(2 * x.t, x.c, x.h, x.w);
    if (!p.dry())
      for (int64_t t = 0; t < x.t; ++t) p.ops->copy(z.frame(2 * t), y.frame(t), y.frame_size());  // both halves
    x = std::move(z);
  }
  const ConvFrameDims d{.ci = x.c,
                        .co = co,
                        .kh = 3,
                        .kw = 3,
                        .h = x.h,
                        .w = x.w,
                        .up = 2,
                        .pad_top = 1,
                        .pad_left = 1,
                        .out_h = 2 * x.h,
                        .out_w = 2 * x.w};
  Frames y = p.make(x.t, co, d.out_h, d.out_w);
  for (int64_t t = 0; t < x.t; ++t) {
    const float* in = x.frame(t);
    p.conv({.x = &in,
            .w = p.param(pre + ".resample.1.weight"),
            .b = p.param(pre + ".resample.1.bias"),
            .y = y.frame(t),
            .d = d});
  }
  return y;
}

// A copy of x (a stage's input kept for its shortcut).
Frames clone(Pass& p, const Frames& x) {
  Frames y = p.make(x.t, x.c, x.h, x.w);
  if (!p.dry()) p.ops->copy(y.data, x.data, x.size());
  return y;
}

// Wan2.2's AvgDown3D of the stage input `in`, added to the stage output y: each chunk padded in front with zero
// frames to a multiple of ft, as Wan pads each chunk it encodes.
void add_avg_down(Pass& p, const VaeLayer& l, const Frames& in, Frames& y) {
  const int64_t ft = l.factor_t, pad = (ft - in.t % ft) % ft;
  MS_CHECK(y.t * ft == in.t + pad && y.c == l.co && y.h * l.factor_s == in.h, l.prefix, ": shortcut shapes");
  for (int64_t j = 0; j < y.t && !p.dry(); ++j) {
    VaeAvgDownParams a{.y = y.frame(j), .ci = in.c, .co = y.c, .ft = ft, .s = l.factor_s, .h = in.h, .w = in.w};
    for (int64_t k = 0; k < ft; ++k) a.x[k] = j * ft + k - pad >= 0 ? in.frame(j * ft + k - pad) : nullptr;
    p.ops->avg_down(a);
  }
}

// Wan2.2's DupUp3D of the stage input `in`, added to the stage output y: each input frame yields ft frames, of
// which the stream's first chunk drops the first ft - 1, as Wan's decoder does on its first chunk.
void add_dup_up(Pass& p, const VaeLayer& l, const Frames& in, Frames& y) {
  const int64_t ft = l.factor_t, drop = p.started.insert(l.prefix).second ? ft - 1 : 0;
  MS_CHECK(y.t == in.t * ft - drop && y.c == l.co && y.h == in.h * l.factor_s, l.prefix, ": shortcut shapes");
  for (int64_t q = 0; q < y.t && !p.dry(); ++q)
    p.ops->dup_up({.x = in.frame((q + drop) / ft),
                   .y = y.frame(q),
                   .ci = in.c,
                   .co = y.c,
                   .ft = ft,
                   .a = (q + drop) % ft,
                   .s = l.factor_s,
                   .h = in.h,
                   .w = in.w});
}

Frames run_layers(Pass& p, const std::vector<VaeLayer>& layers, Frames x) {
  std::vector<Frames> kept;  // the inputs of Wan2.2's stages, for their shortcuts
  for (const VaeLayer& l : layers) {
    const auto& [kind, pre, ci, co, ft, fs] = l;
    switch (kind) {
      case VaeLayerKind::conv:
        x = causal_conv(p, pre, x, co, 3);
        break;
      case VaeLayerKind::res:
        x = residual(p, pre, x, co);
        break;
      case VaeLayerKind::attn:
        x = attention(p, pre, x);
        break;
      case VaeLayerKind::down2d:
      case VaeLayerKind::down3d:
        x = downsample(p, pre, x, co, kind == VaeLayerKind::down3d);
        break;
      case VaeLayerKind::up2d:
      case VaeLayerKind::up3d:
        x = upsample(p, pre, std::move(x), co, kind == VaeLayerKind::up3d);
        break;
      case VaeLayerKind::head:
        x = causal_conv(p, pre + ".2", norm(p, x, pre + ".0.gamma", true), co, 3);
        break;
      case VaeLayerKind::keep:
        kept.push_back(clone(p, x));
        break;
      case VaeLayerKind::avg_down:
      case VaeLayerKind::dup_up:
        MS_CHECK(!kept.empty(), pre, ": no stage input kept");
        (kind == VaeLayerKind::avg_down ? add_avg_down : add_dup_up)(p, l, kept.back(), x);
        kept.pop_back();
        break;
    }
  }
  return x;
}

// Wan2.2's patchify of one frame: pixel (channel k, row i, column j) of [3, H, W] is value (row i / p, column j / p)
// of channel (k p + j % p) p + i % p of the folded frame [3 p^2, H / p, W / p] (einops' (c r q)); p = 1 is the frame
// itself. Calls f(k, the pixel's offset in its channel's plane, its offset in the folded frame) for every pixel.
template <class F>
void for_each_folded(int64_t H, int64_t W, int64_t pt, F f) {
  const int64_t h = H / pt, w = W / pt;
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t q = 0; q < pt; ++q)    // row offset
      for (int64_t r = 0; r < pt; ++r)  // column offset
        for (int64_t i = 0; i < h; ++i) {
          const int64_t pixel = (i * pt + q) * W + r, folded = (((k * pt + r) * pt + q) * h + i) * w;
          for (int64_t j = 0; j < w; ++j) f(k, pixel + j * pt, folded + j);
        }
}

// Clip frames [b, e) of video [3, F, H, W] as the encoder takes them: [e - b, 3 p^2, H / p, W / p].
std::vector<float> fold_frames(const float* video, int64_t F, int64_t H, int64_t W, int64_t b, int64_t e, int64_t pt) {
  const int64_t frame = 3 * H * W;
  std::vector<float> out(size_t((e - b) * frame));
  for (int64_t t = b; t < e; ++t)
    for_each_folded(H, W, pt, [&](int64_t k, int64_t pixel, int64_t folded) {
      out[size_t((t - b) * frame + folded)] = video[(k * F + t) * H * W + pixel];
    });
  return out;
}

// The chunks [begin, end) of a stream of n frames: frame 0 alone, then `step` at a time.
std::vector<std::pair<int64_t, int64_t>> chunks(int64_t n, int64_t step) {
  std::vector<std::pair<int64_t, int64_t>> out{{0, 1}};
  for (int64_t b = 1; b < n; b += step) out.emplace_back(b, std::min(n, b + step));
  return out;
}

void check_chunking(const VaeChunking& ch) {
  MS_CHECK(ch.encode_frames > 0 && ch.encode_frames % kWanChunk == 0 && ch.decode_latents > 0, "VAE chunks of ",
           ch.encode_frames, " frames / ", ch.decode_latents, " latents");
}

// Encodes into latents (null in a dry pass); returns the FLOPs and peak activation bytes.
PassCost encode_pass(const VaeConfig& c, VaeOps* ops, const float* video, int64_t F, int64_t H, int64_t W,
                     float* latents, const VaeChunking& ch) {
  check_chunking(ch);
  Pass p(c, ops);
  const auto layers = vae_encoder_layers(c);
  const int64_t z = c.z_dim, T = c.latent_frames(F), h = H / c.space_stride(), wd = W / c.space_stride();
  int64_t t_out = 0;
  for (auto [b, e] : chunks(F, ch.encode_frames)) {
    Frames x = p.make(e - b, c.io_channels(), H / c.patch_size, W / c.patch_size);
    if (!p.dry()) ops->upload(x.data, fold_frames(video, F, H, W, b, e, c.patch_size).data(), x.size());
    Frames y = run_layers(p, layers, std::move(x));
    MS_CHECK(y.h == h && y.w == wd && t_out + y.t <= T, "encoder chunk shape");
    const Frames mu = pointwise(p, p.param("conv1.weight"), p.param("conv1.bias"), y, z);  // [z, 2z) log-var: unused
    if (!p.dry()) {
      std::vector<float> host(size_t(mu.size()));  // [t, z, h, w]
      ops->download(host.data(), mu.data, mu.size());
      for (int64_t k = 0; k < z; ++k) {
        const float mean = c.latents_mean[size_t(k)], inv_std = 1.0f / c.latents_std[size_t(k)];
        for (int64_t t = 0; t < mu.t; ++t) {
          const float* src = host.data() + (t * z + k) * h * wd;
          float* dst = latents + (k * T + t_out + t) * h * wd;
          for (int64_t i = 0; i < h * wd; ++i) dst[i] = (src[i] - mean) * inv_std;
        }
      }
    }
    t_out += y.t;
  }
  MS_CHECK(t_out == T, "encoder produced ", t_out, " latent frames, expected ", T);
  return p.cost();
}

PassCost decode_pass(const VaeConfig& c, VaeOps* ops, const float* latents, int64_t T, int64_t h, int64_t wd,
                     float* video, const VaeChunking& ch) {
  check_chunking(ch);
  Pass p(c, ops);
  const auto layers = vae_decoder_layers(c);
  const int64_t z = c.z_dim, F = c.video_frames(T), H = h * c.space_stride(), W = wd * c.space_stride();
  int64_t f_out = 0;
  for (auto [b, e] : chunks(T, ch.decode_latents)) {
    Frames x = p.make(e - b, z, h, wd);
    if (!p.dry()) {
      std::vector<float> host(size_t(x.size()));  // [t, z, h, w]
      for (int64_t k = 0; k < z; ++k) {
        const float mean = c.latents_mean[size_t(k)], std_k = c.latents_std[size_t(k)];
        for (int64_t t = b; t < e; ++t) {
          const float* src = latents + (k * T + t) * h * wd;
          float* dst = host.data() + ((t - b) * z + k) * h * wd;
          for (int64_t i = 0; i < h * wd; ++i) dst[i] = src[i] * std_k + mean;
        }
      }
      ops->upload(x.data, host.data(), x.size());
    }
    Frames y = run_layers(p, layers, pointwise(p, p.param("conv2.weight"), p.param("conv2.bias"), x, z));
    const int64_t pt = c.patch_size;
    MS_CHECK(y.c == c.io_channels() && y.h * pt == H && y.w * pt == W && f_out + y.t <= F, "decoder chunk shape");
    if (!p.dry()) {
      std::vector<float> host(size_t(y.size()));  // [t, 3 p^2, H / p, W / p]
      ops->download(host.data(), y.data, y.size());
      for (int64_t t = 0; t < y.t; ++t)  // unfolded as Wan2.2's unpatchify does
        for_each_folded(H, W, pt, [&](int64_t k, int64_t pixel, int64_t folded) {
          video[(k * F + f_out + t) * H * W + pixel] =
              std::clamp(host[size_t(t * y.frame_size() + folded)], -1.0f, 1.0f);
        });
    }
    f_out += y.t;
  }
  MS_CHECK(f_out == F, "decoder produced ", f_out, " frames, expected ", F);
  return p.cost();
}

// The tiles along an axis of n positions: `tile` long (the last one ending at n), starting every 3/4 tile rounded
// down to `align`; one tile of n when tile is 0 or covers n.
struct Span {
  int64_t begin, size;
};
std::vector<Span> spans(int64_t n, int64_t tile, int64_t align) {
  if (tile <= 0 || tile >= n) return {{0, n}};
  const int64_t stride = std::max(align, tile * 3 / 4 / align * align);
  std::vector<Span> out;
  for (int64_t b = 0; b + tile < n; b += stride) out.push_back({b, tile});
  out.push_back({out.back().begin + stride, n - out.back().begin - stride});
  return out;
}

// The blend weight of output position p of span k of s (spans in input units, outputs up / down as large): a linear
// ramp over each overlap with a neighbour, so that the two tiles' weights sum to 1 there.
double ramp(const std::vector<Span>& s, size_t k, int64_t p, int64_t up, int64_t down) {
  double w = 1;
  if (k > 0) {
    const int64_t overlap = (s[k - 1].begin + s[k - 1].size - s[k].begin) * up / down;
    if (p < overlap) w *= (double(p) + 0.5) / double(overlap);
  }
  if (k + 1 < s.size()) {
    const int64_t overlap = (s[k].begin + s[k].size - s[k + 1].begin) * up / down, size = s[k].size * up / down;
    if (p >= size - overlap) w *= (double(size - p) - 0.5) / double(overlap);
  }
  return w;
}

// Runs `run(sub_in, h, w, sub_out)` on overlapping tiles of in [c_in, t_in, h_in, w_in] (tile extents in input
// units, starts aligned to `align`) and blends the outputs [c_out, t_out, h * up / down, w * up / down] into out.
template <class Run>
void run_tiled(const float* in, int64_t c_in, int64_t t_in, int64_t h_in, int64_t w_in, int64_t tile_h, int64_t tile_w,
               int64_t align, float* out, int64_t c_out, int64_t t_out, int64_t up, int64_t down, const Run& run) {
  const auto rows = spans(h_in, tile_h, align), cols = spans(w_in, tile_w, align);
  if (rows.size() == 1 && cols.size() == 1) return run(in, h_in, w_in, out);
  const int64_t H = h_in * up / down, W = w_in * up / down;
  std::vector<double> acc(size_t(c_out * t_out * H * W)), weight(size_t(H * W));
  std::vector<float> sub_in, sub_out;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t q = 0; q < cols.size(); ++q) {
      const Span a = rows[r], b = cols[q];
      sub_in.resize(size_t(c_in * t_in * a.size * b.size));
      for (int64_t ct = 0; ct < c_in * t_in; ++ct)
        for (int64_t i = 0; i < a.size; ++i)
          std::copy_n(in + (ct * h_in + a.begin + i) * w_in + b.begin, b.size,
                      sub_in.data() + (ct * a.size + i) * b.size);
      const int64_t h = a.size * up / down, w = b.size * up / down, i0 = a.begin * up / down, j0 = b.begin * up / down;
      sub_out.resize(size_t(c_out * t_out * h * w));
      run(sub_in.data(), a.size, b.size, sub_out.data());
      for (int64_t i = 0; i < h; ++i) {
        const double g_row = ramp(rows, r, i, up, down);
        for (int64_t j = 0; j < w; ++j) {
          const double g = g_row * ramp(cols, q, j, up, down);
          weight[size_t((i0 + i) * W + j0 + j)] += g;
          for (int64_t ct = 0; ct < c_out * t_out; ++ct)
            acc[size_t((ct * H + i0 + i) * W + j0 + j)] += g * sub_out[size_t((ct * h + i) * w + j)];
        }
      }
    }
  for (int64_t ct = 0; ct < c_out * t_out; ++ct)
    for (int64_t p = 0; p < H * W; ++p) out[ct * H * W + p] = float(acc[size_t(ct * H * W + p)] / weight[size_t(p)]);
}

// What run_tiled holds beside `pass_bytes(h, w)` of one tile of h x w input positions: the tile's input and output
// and the blend's float64 accumulators (nothing when the whole frame is one tile); returns the sum.
template <class PassBytes>
int64_t tiled_bytes(int64_t c_in, int64_t t_in, int64_t h_in, int64_t w_in, int64_t tile_h, int64_t tile_w,
                    int64_t align, int64_t c_out, int64_t t_out, int64_t up, int64_t down,
                    const PassBytes& pass_bytes) {
  const auto rows = spans(h_in, tile_h, align), cols = spans(w_in, tile_w, align);
  if (rows.size() == 1 && cols.size() == 1) return pass_bytes(h_in, w_in);
  const int64_t h = rows.front().size, w = cols.front().size;  // the largest tile: later ones are no larger
  const int64_t H = h_in * up / down, W = w_in * up / down;
  return int64_t(sizeof(double)) * (c_out * t_out + 1) * H * W +
         int64_t(sizeof(float)) * (c_in * t_in * h * w + c_out * t_out * (h * up / down) * (w * up / down)) +
         pass_bytes(h, w);
}

}  // namespace

void check_vae_tile(const VaeChunking& ch, const std::string& what) {
  for (int64_t side : {ch.tile_h, ch.tile_w})
    if (side < 0 || side % 8 || (side && side < kMinTile))
      MS_FAIL(what, " ", ch.tile_h, ",", ch.tile_w, ": tile sides are pixels, multiples of 8 and at least ", kMinTile,
              " (e.g. 256,256), or 0 for the whole frame");
}

void check_vae_video_shape(const VaeConfig& c, int64_t frames, int64_t height, int64_t width, const std::string& what) {
  if (frames < 1 || (frames - 1) % kWanChunk)
    MS_FAIL(what, " has ", frames, " frames; the VAE takes 1 + 4k frames (e.g. ",
            1 + kWanChunk * std::max<int64_t>(0, (frames - 1) / kWanChunk), " or ",
            1 + kWanChunk * std::max<int64_t>(1, (frames - 1) / kWanChunk + 1), ")");
  const int64_t s = c.space_stride();
  for (auto [name, v] : {std::pair<const char*, int64_t>{"height", height}, {"width", width}})
    if (v < s || v % s)
      MS_FAIL(what, " has ", name, " ", v, "; the VAE takes multiples of ", s, " (e.g. ", std::max(s, v / s * s),
              " or ", (v / s + 1) * s, ")");
}

namespace {
// Throws ms::Error unless the tiles are whole multiples of the VAE's spatial stride (Wan2.2's: 16 pixels).
void check_tile_stride(const VaeConfig& c, const VaeChunking& ch) {
  if (ch.tile_h % c.space_stride() || ch.tile_w % c.space_stride())
    MS_FAIL("--vae-tile ", ch.tile_h, ",", ch.tile_w, ": this VAE's tiles are multiples of ", c.space_stride(),
            " pixels (its spatial stride)");
}
}  // namespace

void vae_encode(VaeOps& ops, const float* video, int64_t frames, int64_t height, int64_t width, float* latents,
                const VaeChunking& chunking) {
  const VaeConfig& c = ops.weights().config();
  check_vae_video_shape(c, frames, height, width, "video");
  check_tile_stride(c, chunking);
  const int64_t s = c.space_stride();
  run_tiled(video, 3, frames, height, width, chunking.tile_h, chunking.tile_w, s, latents, c.z_dim,
            c.latent_frames(frames), 1, s, [&](const float* in, int64_t h, int64_t wd, float* out) {
              encode_pass(c, &ops, in, frames, h, wd, out, chunking);
            });
}

void vae_decode(VaeOps& ops, const float* latents, int64_t latent_frames, int64_t height, int64_t width, float* video,
                const VaeChunking& chunking) {
  MS_CHECK(latent_frames > 0 && height > 0 && width > 0, "latents of ", latent_frames, " x ", height, " x ", width);
  const VaeConfig& c = ops.weights().config();
  check_tile_stride(c, chunking);
  const int64_t s = c.space_stride();
  run_tiled(latents, c.z_dim, latent_frames, height, width, chunking.tile_h / s, chunking.tile_w / s, 1, video, 3,
            c.video_frames(latent_frames), s, 1, [&](const float* in, int64_t h, int64_t wd, float* out) {
              decode_pass(c, &ops, in, latent_frames, h, wd, out, chunking);
            });
}

double vae_encode_flops(const VaeConfig& c, int64_t frames, int64_t height, int64_t width) {
  return encode_pass(c, nullptr, nullptr, frames, height, width, nullptr, {}).flops;
}

double vae_decode_flops(const VaeConfig& c, int64_t frames, int64_t height, int64_t width) {
  const int64_t s = c.space_stride();
  return decode_pass(c, nullptr, nullptr, c.latent_frames(frames), height / s, width / s, nullptr, {}).flops;
}

int64_t vae_encode_bytes(const VaeConfig& c, int64_t frames, int64_t height, int64_t width,
                         const VaeChunking& chunking) {
  const int64_t s = c.space_stride();
  return tiled_bytes(3, frames, height, width, chunking.tile_h, chunking.tile_w, s, c.z_dim, c.latent_frames(frames), 1,
                     s, [&](int64_t h, int64_t w) {
                       return encode_pass(c, nullptr, nullptr, frames, h, w, nullptr, chunking).peak_bytes;
                     });
}

int64_t vae_decode_bytes(const VaeConfig& c, int64_t frames, int64_t height, int64_t width,
                         const VaeChunking& chunking) {
  const int64_t s = c.space_stride(), T = c.latent_frames(frames);
  return tiled_bytes(
      c.z_dim, T, height / s, width / s, chunking.tile_h / s, chunking.tile_w / s, 1, 3, frames, s, 1,
      [&](int64_t h, int64_t w) { return decode_pass(c, nullptr, nullptr, T, h, w, nullptr, chunking).peak_bytes; });
}

void check_vae_fits(const VaeConfig& c, bool encode, int64_t frames, int64_t height, int64_t width,
                    const VaeChunking& chunking, const HostLimit& limit, const std::string& what) {
  const int64_t s = c.space_stride();
  const int64_t out =
      encode ? c.z_dim * c.latent_frames(frames) * (height / s) * (width / s) : 3 * frames * height * width;
  const auto need = [&](const VaeChunking& k) {
    return int64_t(sizeof(float)) * out +
           (encode ? vae_encode_bytes(c, frames, height, width, k) : vae_decode_bytes(c, frames, height, width, k));
  };
  const int64_t n = need(chunking);
  if (n <= limit.bytes) return;
  std::string fix = "Use fewer frames or a smaller size";
  VaeChunking tiled = chunking;
  tiled.tile_h = tiled.tile_w = 256;
  if (const int64_t t = need(tiled); t <= limit.bytes && (height > 256 || width > 256))
    fix = cat("--vae-tile 256,256 needs ", format_bytes(double(t)), " and fits");
  require_host_memory(what, n,
                      cat(encode ? "encoding " : "decoding ", frames, "x", height, "x", width, " pixels: ",
                          format_bytes(double(n - int64_t(sizeof(float)) * out)), " of activations and the output"),
                      limit, fix);
}

}  // namespace ms
