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
};

}  // namespace ms
