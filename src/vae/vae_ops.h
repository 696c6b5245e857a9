// Where a VAE pass keeps its frames and what computes on them (vae_model.h walks the layers through this): host
// memory and the CPU kernels (cpu_vae_ops), or a GPU's memory and kernels (backend/cuda/vae_ops.h, made by
// registry's make_vae_ops). Every pointer handed to an ops object is in its memory; upload and download cross from
// and to the host. All frames are float32, channels-first ([C, N] for N pixels).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "ops/conv3d.h"
#include "vae/vae_weights.h"

namespace ms {

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

  // One output frame of a convolution (ops/conv3d.h): x holds d.kt frame pointers (null: zeros).
  virtual void conv(const float* const* x, const float* w, const float* b, float* y, const ConvFrameDims& d) = 0;
  // Wan's channel RMS norm, then SiLU when silu (ops/channel_norm.h): x, y [C, N] (y may be x).
  virtual void channel_rms_norm(const float* x, const float* gamma, float* y, int64_t C, int64_t N, bool silu) = 0;
  // One frame's single-head attention among its N pixels, after the norm: [q; k; v] = w_qkv [3C, C] h + b_qkv,
  // o = v softmax(q^T k / sqrt(C))^T, y = x + w_proj [C, C] o + b_proj. h, x, y [C, N].
  virtual void attention(const float* h, const float* x, const float* w_qkv, const float* b_qkv, const float* w_proj,
                         const float* b_proj, float* y, int64_t C, int64_t N) = 0;
};

// The CPU's attention takes its queries in blocks of this many: its scores [kVaeQueryBlock, N] stay a few MiB, which
// the host-memory ledger of vae_model.cpp counts.
inline constexpr int64_t kVaeQueryBlock = 256;

// Host memory and the CPU kernels; w's weights are read where they lie, so w must outlive the ops.
std::unique_ptr<VaeOps> cpu_vae_ops(const VaeWeights& w);

}  // namespace ms
