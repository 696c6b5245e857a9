#include "backend/cuda/vae_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backend/cuda/channel_norm.h"
#include "backend/cuda/check.h"
#include "backend/cuda/conv3d.h"
#include "backend/cuda/gemm.h"
#include "backend/cuda/vae_kernels.h"
#include "core/check.h"
#include "core/units.h"

namespace ms::cuda {
namespace {

constexpr int64_t kColFloats = int64_t(1) << 24;  // 64 MiB: a convolution's unfolded band

class CudaVaeOps final : public VaeOps {
 public:
  CudaVaeOps(const VaeWeights& w, int64_t score_floats) : w_(w), score_floats_(score_floats) {
    // Freed blocks stay in the device's pool between chunks instead of returning to the driver at each
    // synchronisation; the destructor hands them back.
    int device = 0;
    MS_CUDA_CHECK(cudaGetDevice(&device));
    MS_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool_, device));
    uint64_t keep = UINT64_MAX;
    MS_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep));
    weights_ = alloc(w.count());
    upload(weights_, w.data(), w.count());
  }
  const VaeWeights& weights() const override { return w_; }
  ~CudaVaeOps() override {
    release(weights_);
    uint64_t none = 0;
    cudaStreamSynchronize(stream_);
    cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &none);
    cudaMemPoolTrimTo(pool_, 0);
  }

  float* alloc(int64_t n) override {
    void* p = nullptr;
    const cudaError_t e = cudaMallocAsync(&p, size_t(std::max<int64_t>(n, 1)) * sizeof(float), stream_);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clears the error
      MS_FAIL("the VAE on the GPU ran out of device memory allocating ", format_bytes(double(n) * sizeof(float)),
              "; encode or decode in spatial tiles (--vae-tile 256,256) or on the CPU (--backend cpu)");
    }
    MS_CUDA_CHECK(e);
    return static_cast<float*>(p);
  }
  void release(float* p) noexcept override {
    if (p) cudaFreeAsync(p, stream_);
  }
  // A weight's offset in the host pool is its offset in the device copy.
  const float* param(const std::string& name) const override { return weights_ + (w_.get(name) - w_.data()); }

  void upload(float* dst, const float* host, int64_t n) override {
    MS_CUDA_CHECK(cudaMemcpyAsync(dst, host, size_t(n) * sizeof(float), cudaMemcpyHostToDevice, stream_));
  }
  void download(float* host, const float* src, int64_t n) override {
    MS_CUDA_CHECK(cudaMemcpyAsync(host, src, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    MS_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void copy(float* dst, const float* src, int64_t n) override {
    MS_CUDA_CHECK(cudaMemcpyAsync(dst, src, size_t(n) * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void add(float* y, const float* x, int64_t n) override { add_into(y, x, n, stream_); }

  void conv(const ConvFrameParams<float>& p) override {
    const int64_t n = conv3d_col_floats(p.d, kColFloats);
    float* col = n > 0 ? alloc(n) : nullptr;
    conv3d_frame_forward(gemm_, p, col, n, stream_);
    release(col);
  }
  void channel_rms_norm(const ChannelNormParams<float>& p) override { channel_rms_norm_forward(p, stream_); }
  void avg_down(const VaeAvgDownParams& p) override { avg_down_add(p, stream_); }
  void dup_up(const VaeDupUpParams& p) override { dup_up_add(p, stream_); }

  // Queries go in blocks of score_floats_ / N, so the scores held at once stay within that.
  void attention(const VaeAttentionParams& p) override {
    const float *h = p.h, *x = p.x, *w_qkv = p.w_qkv, *b_qkv = p.b_qkv, *w_proj = p.w_proj, *b_proj = p.b_proj;
    float* y = p.y;
    const int64_t C = p.C, n = p.N;
    const int64_t block = std::clamp<int64_t>(score_floats_ / n, 1, n);
    float *qkv = alloc(3 * C * n), *o = alloc(C * n), *scores = alloc(block * n);  // [3C, n], [C, n], [block, n]
    fill_rows(qkv, b_qkv, 3 * C, n, stream_);
    gemm_.gemm<float>(false, false, 3 * C, n, C, 1.0f, w_qkv, C, h, n, 1.0f, qkv, n, stream_);
    const float *q = qkv, *k = q + C * n, *v = k + C * n;
    for (int64_t q0 = 0; q0 < n; q0 += block) {
      const int64_t nb = std::min(block, n - q0);
      gemm_.gemm<float>(true, false, nb, n, C, 1.0f, q + q0, n, k, n, 0.0f, scores, n, stream_);  // [nb, n]
      softmax_rows(scores, nb, n, float(1.0 / std::sqrt(double(C))), stream_);
      gemm_.gemm<float>(false, true, C, nb, n, 1.0f, v, n, scores, n, 0.0f, o + q0, n, stream_);  // [C, nb]
    }
    fill_rows(y, b_proj, C, n, stream_);
    add_into(y, x, C * n, stream_);
    gemm_.gemm<float>(false, false, C, n, C, 1.0f, w_proj, C, o, n, 1.0f, y, n, stream_);
    for (float* buf : {qkv, o, scores}) release(buf);
  }

 private:
  const VaeWeights& w_;
  const int64_t score_floats_;
  cudaMemPool_t pool_ = nullptr;
  Stream stream_ = nullptr;
  GemmContext gemm_;
  float* weights_ = nullptr;  // [count] every tensor, as the host pool lays them out
};

}  // namespace

std::unique_ptr<VaeOps> vae_ops(const VaeWeights& w, int64_t score_floats) {
  MS_CHECK(score_floats > 0, "vae_ops: score_floats ", score_floats);
  return std::make_unique<CudaVaeOps>(w, score_floats);
}

}  // namespace ms::cuda
