#include "backend/cpu/vae_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <vector>

#include "backend/cpu/gemm.h"
#include "backend/cpu/softmax_row.h"
#include "core/check.h"
#include "core/parallel.h"
#include "ops/channel_norm.h"

namespace ms {
namespace {

class CpuVaeOps final : public VaeOps {
 public:
  explicit CpuVaeOps(const VaeWeights& w) : w_(w) {}

  const VaeWeights& weights() const override { return w_; }
  float* alloc(int64_t n) override { return new float[size_t(n)]; }
  void release(float* p) noexcept override { delete[] p; }
  const float* param(const std::string& name) const override { return w_.get(name); }

  void upload(float* dst, const float* host, int64_t n) override { copy(dst, host, n); }
  void download(float* host, const float* src, int64_t n) override { copy(host, src, n); }
  void copy(float* dst, const float* src, int64_t n) override { std::memcpy(dst, src, size_t(n) * sizeof(float)); }
  void add(float* y, const float* x, int64_t n) override {
    for (int64_t i = 0; i < n; ++i) y[i] += x[i];
  }
  void conv(const ConvFrameParams<float>& p) override { cpu::conv3d_frame_forward(p); }
  void avg_down(const VaeAvgDownParams& p) override { cpu::vae_avg_down(p); }
  void dup_up(const VaeDupUpParams& p) override { cpu::vae_dup_up(p); }
  void channel_rms_norm(const ChannelNormParams<float>& p) override { cpu::channel_rms_norm_forward(p); }

  // Queries go in blocks, so the scores held at once are [kVaeQueryBlock, N].
  void attention(const VaeAttentionParams& p) override {
    const float *h = p.h, *x = p.x, *w_qkv = p.w_qkv, *b_qkv = p.b_qkv, *w_proj = p.w_proj, *b_proj = p.b_proj;
    float* y = p.y;
    const int64_t C = p.C, n = p.N;
    std::vector<float> qkv(size_t(3 * C * n)), o(size_t(C * n)), scores(size_t(std::min(n, kVaeQueryBlock) * n));
    const float scale = float(1.0 / std::sqrt(double(C)));
    for (int64_t r = 0; r < 3 * C; ++r) std::fill_n(qkv.data() + r * n, n, b_qkv[r]);
    cpu::gemm<float>(false, false, 3 * C, n, C, 1.0f, w_qkv, C, h, n, 1.0f, qkv.data(), n);
    const float *q = qkv.data(), *k = q + C * n, *v = k + C * n;
    for (int64_t q0 = 0; q0 < n; q0 += kVaeQueryBlock) {
      const int64_t nb = std::min(kVaeQueryBlock, n - q0);
      cpu::gemm<float>(true, false, nb, n, C, 1.0f, q + q0, n, k, n, 0.0f, scores.data(), n);  // [nb, n]
      parallel_for(nb, [&](int64_t i) {
        float* row = scores.data() + i * n;
        const float m = cpu::row_max<float>(row, n, -INFINITY);
        const float sum = cpu::exp_affine<float>(row, n, scale, -scale * m);
        for (int64_t j = 0; j < n; ++j) row[j] /= sum;
      });
      cpu::gemm<float>(false, true, C, nb, n, 1.0f, v, n, scores.data(), n, 0.0f, o.data() + q0, n);  // [C, nb]
    }
    std::memcpy(y, x, size_t(C * n) * sizeof(float));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < n; ++i) y[c * n + i] += b_proj[c];
    cpu::gemm<float>(false, false, C, n, C, 1.0f, w_proj, C, o.data(), n, 1.0f, y, n);
  }

 private:
  const VaeWeights& w_;
};

}  // namespace

namespace cpu {

void vae_avg_down(const VaeAvgDownParams& p) {
  const int64_t s = p.s, ho = p.h / s, wo = p.w / s, g = p.ci * p.ft * s * s / p.co;
  const float inv = 1.0f / float(g);
  parallel_for(p.co, [&](int64_t o) {
    float* y = p.y + o * ho * wo;
    for (int64_t k = o * g; k < (o + 1) * g; ++k) {  // the digits (c, a, b, d) of k
      const int64_t c = k / (p.ft * s * s), a = k / (s * s) % p.ft, b = k / s % s, d = k % s;
      if (!p.x[a]) continue;
      const float* x = p.x[a] + c * p.h * p.w;
      for (int64_t i = 0; i < ho; ++i)
        for (int64_t j = 0; j < wo; ++j) y[i * wo + j] += inv * x[(i * s + b) * p.w + j * s + d];
    }
  });
}

void vae_dup_up(const VaeDupUpParams& p) {
  const int64_t s = p.s, ho = p.h * s, wo = p.w * s, r = p.co * p.ft * s * s / p.ci;
  parallel_for(p.co, [&](int64_t o) {
    float* y = p.y + o * ho * wo;
    for (int64_t i = 0; i < ho; ++i) {
      const int64_t n0 = ((o * p.ft + p.a) * s + i % s) * s;
      for (int64_t j = 0; j < wo; ++j) y[i * wo + j] += p.x[((n0 + j % s) / r * p.h + i / s) * p.w + j / s];
    }
  });
}

}  // namespace cpu

std::unique_ptr<VaeOps> cpu_vae_ops(const VaeWeights& w) { return std::make_unique<CpuVaeOps>(w); }

}  // namespace ms
