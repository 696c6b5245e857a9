#include "backend/cuda/cuda_ops.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "backend/cuda/activation.h"
#include "backend/cuda/check.h"
#include "backend/cuda/dsa.h"
#include "backend/cuda/dwconv3d.h"
#include "backend/cuda/embedding.h"
#include "backend/cuda/layernorm.h"
#include "backend/cuda/layernorm_modulate.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/modulate.h"
#include "backend/cuda/patchify.h"
#include "backend/cuda/rmsnorm.h"
#include "backend/cuda/rope.h"
#include "backend/cuda/window_attention.h"
#include "core/check.h"

namespace ms::cuda {

void CudaOps::zero(uint16_t* p, int64_t n) {
  if (n > 0) MS_CUDA_CHECK(cudaMemsetAsync(p, 0, sizeof(uint16_t) * size_t(n), stream));
}
void CudaOps::zero(float* p, int64_t n) {
  if (n > 0) MS_CUDA_CHECK(cudaMemsetAsync(p, 0, sizeof(float) * size_t(n), stream));
}
void CudaOps::copy(uint16_t* dst, const uint16_t* src, int64_t n) {
  if (n > 0) MS_CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(uint16_t) * size_t(n), cudaMemcpyDeviceToDevice, stream));
}

void CudaOps::modulation_forward(const uint16_t* param, const float* e, float* mod, int64_t B, int64_t K, int64_t C,
                                 bool per_chunk) {
  cuda::modulation_forward(param, e, mod, B, K, C, per_chunk, stream);
}
void CudaOps::modulation_backward(const float* dmod, float* dparam, float* de, int64_t B, int64_t K, int64_t C,
                                  bool per_chunk) {
  cuda::modulation_backward(dmod, dparam, de, B, K, C, per_chunk, stream);
}

void CudaOps::norm_modulate_forward(const uint16_t* x, const float* shift, const float* scale, uint16_t*, uint16_t* y,
                                    float* mean, float* rstd, int64_t B, int64_t L, int64_t C, int64_t stride,
                                    double eps) {
  layernorm_modulate_forward(x, shift, scale, y, mean, rstd, B, L, C, stride, eps, stream);
}
void CudaOps::norm_modulate_backward(const uint16_t* x, const uint16_t*, const float* mean, const float* rstd,
                                     const float* scale, const uint16_t* dy, uint16_t*, uint16_t* dx, float* dshift,
                                     float* dscale, int64_t B, int64_t L, int64_t C, int64_t stride) {
  layernorm_modulate_backward(x, mean, rstd, scale, dy, dx, dshift, dscale,
                              scratch_for(layernorm_modulate_backward_scratch(L, C)), B, L, C, stride, stream);
}

void CudaOps::layernorm_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, float* mean,
                                float* rstd, int64_t N, int64_t C, double eps) {
  cuda::layernorm_forward(x, w, b, y, mean, rstd, N, C, eps, stream);
}
void CudaOps::layernorm_backward(const uint16_t* x, const uint16_t* w, const float* mean, const float* rstd,
                                 const uint16_t* dy, uint16_t* dx, float* dw, float* db, int64_t N, int64_t C) {
  cuda::layernorm_backward(x, w, mean, rstd, dy, dx, dw, db, scratch_for(layernorm_backward_scratch(N, C)), N, C,
                           stream);
}
void CudaOps::rmsnorm_forward(const uint16_t* x, const uint16_t* w, uint16_t* y, float* rstd, int64_t N, int64_t C,
                              double eps) {
  cuda::rmsnorm_forward(x, w, y, rstd, N, C, eps, stream);
}
void CudaOps::rmsnorm_backward(const uint16_t* x, const uint16_t* w, const float* rstd, const uint16_t* dy,
                               uint16_t* dx, float* dw, int64_t N, int64_t C) {
  cuda::rmsnorm_backward(x, w, rstd, dy, dx, dw, scratch_for(rmsnorm_backward_scratch(N, C)), N, C, stream);
}
void CudaOps::linear_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t N,
                             int64_t in, int64_t out) {
  cuda::linear_forward(gemm, x, w, b, y, N, in, out, stream);
}
void CudaOps::linear_backward(const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw,
                              float* db, int64_t N, int64_t in, int64_t out) {
  cuda::linear_backward(gemm, x, w, dy, dx, dw, db, scratch_for(linear_backward_scratch(N, out)), N, in, out, stream);
}
void CudaOps::rope_forward(const uint16_t* x, uint16_t* y, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh,
                           int64_t d) {
  cuda::rope_forward(x, y, B, F, H, W, nh, d, stream);
}
void CudaOps::rope_backward(const uint16_t* dy, uint16_t* dx, int64_t B, int64_t F, int64_t H, int64_t W, int64_t nh,
                            int64_t d) {
  cuda::rope_backward(dy, dx, B, F, H, W, nh, d, stream);
}
void CudaOps::time_linear_forward(const float* x, const uint16_t* w, const uint16_t* b, float* y, int64_t N, int64_t in,
                                  int64_t out) {
  linear_f32_forward(x, w, b, y, N, in, out, stream);
}
void CudaOps::time_linear_backward(const float* x, const uint16_t* w, const float* dy, float* dx, float* dw, float* db,
                                   int64_t N, int64_t in, int64_t out) {
  linear_f32_backward(x, w, dy, dx, dw, db, N, in, out, stream);
}
void CudaOps::time_silu_forward(const float* x, float* y, int64_t n) { cuda::silu_forward(x, y, n, stream); }
void CudaOps::time_silu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  cuda::silu_backward(x, dy, dx, n, stream);
}
void CudaOps::sinusoidal_embedding(const float* t, float* out, int64_t B, int64_t dim) {
  cuda::sinusoidal_embedding(t, out, B, dim, stream);
}
void CudaOps::pad_context_forward(const float* context, uint16_t* padded, int64_t B, int64_t Lc, int64_t Lt,
                                  int64_t C) {
  cuda::pad_context_forward(context, padded, B, Lc, Lt, C, stream);
}
void CudaOps::pad_context_backward(const uint16_t* dpadded, float* dcontext, int64_t B, int64_t Lc, int64_t Lt,
                                   int64_t C) {
  cuda::pad_context_backward(dpadded, dcontext, B, Lc, Lt, C, stream);
}
void CudaOps::patchify_forward(const float* latents, uint16_t* patches, const PatchDims& d) {
  cuda::patchify_forward(latents, patches, d, stream);
}
void CudaOps::patchify_backward(const uint16_t* dpatches, float* dlatents, const PatchDims& d) {
  cuda::patchify_backward(dpatches, dlatents, d, stream);
}
void CudaOps::unpatchify_forward(const uint16_t* tokens, float* video, const PatchDims& d) {
  cuda::unpatchify_forward(tokens, video, d, stream);
}
void CudaOps::unpatchify_backward(const float* dvideo, uint16_t* dtokens, const PatchDims& d) {
  cuda::unpatchify_backward(dvideo, dtokens, d, stream);
}
void CudaOps::gelu_tanh_forward(const uint16_t* x, uint16_t* y, int64_t n) { cuda::gelu_tanh_forward(x, y, n, stream); }
void CudaOps::gelu_tanh_backward(const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n) {
  cuda::gelu_tanh_backward(x, dy, dx, n, stream);
}
void CudaOps::gate_residual_forward(const uint16_t* x, const uint16_t* y, const float* gate, uint16_t* out, int64_t B,
                                    int64_t L, int64_t C, int64_t stride) {
  cuda::gate_residual_forward(x, y, gate, out, B, L, C, stride, stream);
}
void CudaOps::gate_residual_backward(const uint16_t* y, const float* gate, const uint16_t* dout, uint16_t* dx,
                                     uint16_t* dy, float* dgate, int64_t B, int64_t L, int64_t C, int64_t stride) {
  cuda::gate_residual_backward(y, gate, dout, dx, dy, dgate, scratch_for(modulate_backward_scratch(L, C)), B, L, C,
                               stride, stream);
}
void CudaOps::window_attention_forward(const WindowAttentionParams<uint16_t, float>& p) {
  cuda::window_attention_forward(p, launch());
}
void CudaOps::window_attention_backward(const WindowAttentionParams<uint16_t, float>& p) {
  cuda::window_attention_backward(p, launch());
}
void CudaOps::dsa_forward(const DsaParams<uint16_t, float>& p) { cuda::dsa_forward(p, launch()); }
void CudaOps::dsa_backward(const DsaParams<uint16_t, float>& p) { cuda::dsa_backward(p, launch()); }
void CudaOps::dwconv3d_forward(const uint16_t* x, const uint16_t* w, const uint16_t* b, uint16_t* y, int64_t B,
                               int64_t Tn, int64_t H, int64_t W, int64_t C) {
  cuda::dwconv3d_forward(x, w, b, y, B, Tn, H, W, C, stream);
}
void CudaOps::dwconv3d_backward(const uint16_t* x, const uint16_t* w, const uint16_t* dy, uint16_t* dx, float* dw,
                                float* db, int64_t B, int64_t Tn, int64_t H, int64_t W, int64_t C) {
  cuda::dwconv3d_backward(x, w, dy, dx, dw, db, scratch_for(dwconv3d_backward_scratch(B * Tn * H * W, C)), B, Tn, H, W,
                          C, stream);
}
void CudaOps::dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p) { cuda::dsa_offsets_forward(p, launch()); }
void CudaOps::dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p) { cuda::dsa_offsets_backward(p, launch()); }
void CudaOps::attention_forward(const AttentionParams<uint16_t, float>& p) { cuda::attention_forward(p, launch()); }
void CudaOps::attention_backward(const AttentionParams<uint16_t, float>& p) { cuda::attention_backward(p, launch()); }

}  // namespace ms::cuda
