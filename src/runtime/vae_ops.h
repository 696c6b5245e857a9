// Where a VAE pass keeps its frames and what computes on them (vae/vae_model.h walks the layers through this): host
// memory and the CPU kernels (backend/cpu/vae_ops.h), or a GPU's memory and kernels (backend/cuda/vae_ops.h); the
// registry makes a backend's (make_vae_ops). Every pointer handed to an ops object is in its memory; upload and
// download cross from and to the host. All frames are float32, channels-first ([C, N] for N pixels).
#pragma once
#include <cstdint>
#include <string>

#include "model/vae_weights.h"
#include "ops/channel_norm.h"
#include "ops/conv3d.h"

namespace ms {

// One frame's single-head attention among its N pixels, after the norm: [q; k; v] = w_qkv [3C, C] h + b_qkv,
// o = v softmax(q^T k / sqrt(C))^T, y = x + w_proj [C, C] o + b_proj.
struct VaeAttentionParams {
  const float* h = nullptr;  // [C, N] the normed frame
  const float* x = nullptr;  // [C, N] the frame
  const float *w_qkv = nullptr, *b_qkv = nullptr, *w_proj = nullptr, *b_proj = nullptr;
  float* y = nullptr;  // [C, N]
  int64_t C = 0, N = 0;
};

// Wan2.2's shortcut over a stage (vae2_2.py's AvgDown3D), one output frame added to y [co, h / s, w / s]: the mean of
// g = ci ft s^2 / co values, y[o, i, j] += mean over k < g of x[a][c, i s + b, j s + d], (c, a, b, d) the digits of
// o g + k in the radices (ci, ft, s, s); x[a] [ci, h, w], null for a zero frame (the clip's front padding).
struct VaeAvgDownParams {
  const float* x[2] = {nullptr, nullptr};  // ft <= 2 input frames
  float* y = nullptr;
  int64_t ci = 0, co = 0, ft = 1, s = 1, h = 0, w = 0;
};

// Wan2.2's shortcut over a decoder stage (DupUp3D), output frame a of the ft that input frame x [ci, h, w] yields,
// added to y [co, h s, w s]: y[o, i, j] += x[n / r, i / s, j / s], n = ((o ft + a) s + i % s) s + j % s,
// r = co ft s^2 / ci.
struct VaeDupUpParams {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t ci = 0, co = 0, ft = 1, a = 0, s = 1, h = 0, w = 0;
};

class VaeOps {
 public:
  virtual ~VaeOps() = default;

  virtual const VaeWeights& weights() const = 0;  // the VAE these ops were made for
  virtual float* alloc(int64_t n) = 0;            // n floats, contents undefined; throws ms::Error when memory runs out
  virtual void release(float* p) noexcept = 0;
  virtual const float* param(const std::string& name) const = 0;  // a weight of the VAE, in this memory

  // host may be reused (or freed) as soon as upload returns, though the copy into this memory may still be under way.
  virtual void upload(float* dst, const float* host, int64_t n) = 0;
  virtual void download(float* host, const float* src, int64_t n) = 0;  // complete when it returns
  virtual void copy(float* dst, const float* src, int64_t n) = 0;
  virtual void add(float* y, const float* x, int64_t n) = 0;  // y += x

  // One output frame of a convolution (ops/conv3d.h).
  virtual void conv(const ConvFrameParams<float>& p) = 0;
  // Wan's channel RMS norm, then SiLU when p.silu (ops/channel_norm.h).
  virtual void channel_rms_norm(const ChannelNormParams<float>& p) = 0;
  virtual void attention(const VaeAttentionParams& p) = 0;
  virtual void avg_down(const VaeAvgDownParams& p) = 0;
  virtual void dup_up(const VaeDupUpParams& p) = 0;
};

}  // namespace ms
