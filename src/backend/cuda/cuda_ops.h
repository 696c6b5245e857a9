// The CUDA ops policy of model/block_impl.h: bf16 activations and weights, fp32 statistics, modulation and
// weight gradients, every op enqueued on one stream. GEMMs go through a GemmContext; the deterministic
// reductions of the backward share one fp32 scratch buffer (block_reduction_scratch), which the stream's order
// makes safe to reuse from op to op. Window attention runs the flash kernels per cell, DSA and its offset network
// the kernels of backend/cuda/dsa.cu and dwconv3d.cu. The LayerNorm before each modulation is fused with it (the
// normalised tensor is never written).
#pragma once
#include <array>
#include <cstdint>

#include "backend/cuda/attention.h"
#include "backend/cuda/device.h"
#include "backend/cuda/dsa.h"
#include "backend/cuda/patchify.h"
#include "model/config.h"
#include "model/dims.h"
#include "ops/window_attention.h"

namespace ms::cuda {

class GemmContext;

struct CudaOps {
  using Act = uint16_t;  // bf16
  using Stat = float;
  using Weight = uint16_t;  // bf16
  using Grad = float;
  using Io = float;  // the model's inputs and the velocity
  static constexpr bool kFusedNormModulate = true;

  GemmContext& gemm;
  Stream stream;
  float* scratch;         // [scratch_numel] on the device
  int64_t scratch_numel;  // >= block_reduction_scratch (runtime/reduction_scratch.h) of the shapes it runs
  int64_t dsa_halo_rows = kDsaHaloRows;  // dsa's K/V rows staged in shared memory per block (0: none; speed only)

  void zero(uint16_t* p, int64_t n);
  void zero(float* p, int64_t n);
  void copy(uint16_t* dst, const uint16_t* src, int64_t n);

  void modulation_forward(const uint16_t* param, const float* e, float* mod, int64_t B, int64_t K, int64_t C,
                          bool per_chunk);
  void modulation_backward(const float* dmod, float* dparam, float* de, int64_t B, int64_t K, int64_t C,
                           bool per_chunk);
  // ln is unused (fused): LayerNorm and modulation in one pass.
  void norm_modulate_forward(const uint16_t* x, const float* shift, const float* scale, uint16_t* ln, uint16_t* y,
                             float* mean, float* rstd, int64_t B, int64_t L, int64_t C, int64_t stride, double eps);
  // ln and tmp are unused (fused).
  void norm_modulate_backward(const uint16_t* x, const uint16_t* ln, const float* mean, const float* rstd,
                              const float* scale, const uint16_t* dy, uint16_t* tmp, uint16_t* dx, float* dshift,
                              float* dscale, int64_t B, int64_t L, int64_t C, int64_t stride);
  void layernorm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, float* mean, float* rstd,
                         int64_t N, int64_t C, double eps);
  void layernorm_backward(const uint16_t* x, const uint16_t* w, const float* mean, const float* rstd,
                          const uint16_t* dy, uint16_t* dx, float* dw, float* db, int64_t N, int64_t C);
  void rmsnorm_forward(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t N, int64_t C,
                       double eps);
  void rmsnorm_backward(const uint16_t* x, const uint16_t* w, const float* rstd, const uint16_t* dy, uint16_t* dx,
                        float* dw, int64_t N, int64_t C);
  void linear_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t N, int64_t in,
                      int64_t out);
  void linear_backward(const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw, float* db,
                       int64_t N, int64_t in, int64_t out);
  void rope_forward(const uint16_t* x, uint16_t* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh, int64_t d);
  void rope_backward(const uint16_t* dy, uint16_t* dx, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh,
                     int64_t d);
  // The time path in fp32 (linear_f32, SiLU on fp32), the embeddings and the re-layouts.
  void time_linear_forward(const float* x, const uint16_t* w, const uint16_t* b, float* y, int64_t N, int64_t in,
                           int64_t out);
  void time_linear_backward(const float* x, const uint16_t* w, const float* dy, float* dx, float* dw, float* db,
                            int64_t N, int64_t in, int64_t out);
  void time_silu_forward(const float* x, float* y, int64_t n);
  void time_silu_backward(const float* x, const float* dy, float* dx, int64_t n);
  void sinusoidal_embedding(const float* t, float* out, int64_t B, int64_t dim);
  void pad_context_forward(const float* context, uint16_t* padded, int64_t B, int64_t Lc, int64_t Lt, int64_t C);
  void pad_context_backward(const uint16_t* dpadded, float* dcontext, int64_t B, int64_t Lc, int64_t Lt, int64_t C);
  void patchify_forward(const float* latents, uint16_t* patches, const PatchDims& d);
  void patchify_backward(const uint16_t* dpatches, float* dlatents, const PatchDims& d);
  void unpatchify_forward(const uint16_t* tokens, float* video, const PatchDims& d);
  void unpatchify_backward(const float* dvideo, uint16_t* dtokens, const PatchDims& d);
  void gelu_tanh_forward(const uint16_t* x, uint16_t* y, int64_t n);
  void gelu_tanh_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n);
  void gate_residual_forward(const uint16_t* x, const uint16_t* y, const float* gate, uint16_t* out, int64_t B,
                             int64_t L, int64_t C, int64_t stride);
  void gate_residual_backward(const uint16_t* y, const float* gate, const uint16_t* dout, uint16_t* dx, uint16_t* dy,
                              float* dgate, int64_t B, int64_t L, int64_t C, int64_t stride);
  void window_attention_forward(const WindowAttentionParams<uint16_t, float>& p);
  void window_attention_backward(const WindowAttentionParams<uint16_t, float>& p);
  void dsa_forward(const DsaParams<uint16_t, float>& p);
  void dsa_backward(const DsaParams<uint16_t, float>& p);
  void dwconv3d_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t B, int64_t Tn,
                        int64_t H, int64_t W, int64_t C);
  void dwconv3d_backward(const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw, float* db,
                         int64_t B, int64_t Tn, int64_t H, int64_t W, int64_t C);
  void dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p);
  void dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p);
  void attention_forward(const AttentionParams<uint16_t, float>& p);
  void attention_backward(const AttentionParams<uint16_t, float>& p);

 private:
  Launch launch() const { return {stream, scratch, scratch_numel, dsa_halo_rows}; }
  float* scratch_for(int64_t need) const { return launch().scratch_for(need); }
};

}  // namespace ms::cuda
