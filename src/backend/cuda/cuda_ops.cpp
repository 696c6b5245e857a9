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

void CudaOps::modulation_forward(const ModulationParams<uint16_t, float>& p) { cuda::modulation_forward(p, stream); }
void CudaOps::modulation_backward(const ModulationParams<uint16_t, float>& p) { cuda::modulation_backward(p, stream); }
void CudaOps::norm_modulate_forward(const NormModulateParams<uint16_t, float>& p) {
  layernorm_modulate_forward(p, stream);
}
void CudaOps::norm_modulate_backward(const NormModulateParams<uint16_t, float>& p) {
  layernorm_modulate_backward(p, launch());
}
void CudaOps::layernorm_forward(const LayerNormParams<uint16_t, float>& p) { cuda::layernorm_forward(p, stream); }
void CudaOps::layernorm_backward(const LayerNormParams<uint16_t, float>& p) { cuda::layernorm_backward(p, launch()); }
void CudaOps::rmsnorm_forward(const RmsNormParams<uint16_t, float>& p) { cuda::rmsnorm_forward(p, stream); }
void CudaOps::rmsnorm_backward(const RmsNormParams<uint16_t, float>& p) { cuda::rmsnorm_backward(p, launch()); }
void CudaOps::linear_forward(const LinearParams<uint16_t, uint16_t, float>& p) {
  cuda::linear_forward(gemm, p, stream);
}
void CudaOps::linear_backward(const LinearParams<uint16_t, uint16_t, float>& p) {
  cuda::linear_backward(gemm, p, launch());
}
void CudaOps::rope_forward(const RopeParams<uint16_t>& p) { cuda::rope_forward(p, stream); }
void CudaOps::rope_backward(const RopeParams<uint16_t>& p) { cuda::rope_backward(p, stream); }
void CudaOps::time_linear_forward(const LinearParams<float, uint16_t, float>& p) { linear_f32_forward(p, stream); }
void CudaOps::time_linear_backward(const LinearParams<float, uint16_t, float>& p) { linear_f32_backward(p, stream); }
void CudaOps::time_silu_forward(const ActivationParams<float>& p) { cuda::silu_forward(p, stream); }
void CudaOps::time_silu_backward(const ActivationParams<float>& p) { cuda::silu_backward(p, stream); }
void CudaOps::sinusoidal_embedding(const SinusoidalParams<float>& p) { cuda::sinusoidal_embedding(p, stream); }
void CudaOps::pad_context_forward(const PadContextParams<float, uint16_t>& p) { cuda::pad_context_forward(p, stream); }
void CudaOps::pad_context_backward(const PadContextParams<float, uint16_t>& p) {
  cuda::pad_context_backward(p, stream);
}
void CudaOps::patchify_forward(const PatchifyParams<float, uint16_t>& p) { cuda::patchify_forward(p, stream); }
void CudaOps::patchify_backward(const PatchifyParams<float, uint16_t>& p) { cuda::patchify_backward(p, stream); }
void CudaOps::unpatchify_forward(const UnpatchifyParams<uint16_t, float>& p) { cuda::unpatchify_forward(p, stream); }
void CudaOps::unpatchify_backward(const UnpatchifyParams<uint16_t, float>& p) { cuda::unpatchify_backward(p, stream); }
void CudaOps::gelu_tanh_forward(const ActivationParams<uint16_t>& p) { cuda::gelu_tanh_forward(p, stream); }
void CudaOps::gelu_tanh_backward(const ActivationParams<uint16_t>& p) { cuda::gelu_tanh_backward(p, stream); }
void CudaOps::gate_residual_forward(const GateResidualParams<uint16_t, float>& p) {
  cuda::gate_residual_forward(p, stream);
}
void CudaOps::gate_residual_backward(const GateResidualParams<uint16_t, float>& p) {
  cuda::gate_residual_backward(p, launch());
}
void CudaOps::window_attention_forward(const WindowAttentionParams<uint16_t, float>& p) {
  cuda::window_attention_forward(p, launch());
}
void CudaOps::window_attention_backward(const WindowAttentionParams<uint16_t, float>& p) {
  cuda::window_attention_backward(p, launch());
}
void CudaOps::dsa_forward(const DsaParams<uint16_t, float>& p) { cuda::dsa_forward(p, launch()); }
void CudaOps::dsa_backward(const DsaParams<uint16_t, float>& p) { cuda::dsa_backward(p, launch()); }
void CudaOps::dwconv3d_forward(const Dwconv3dParams<uint16_t, float>& p) { cuda::dwconv3d_forward(p, stream); }
void CudaOps::dwconv3d_backward(const Dwconv3dParams<uint16_t, float>& p) { cuda::dwconv3d_backward(p, launch()); }
void CudaOps::dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p) { cuda::dsa_offsets_forward(p, launch()); }
void CudaOps::dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p) { cuda::dsa_offsets_backward(p, launch()); }
void CudaOps::attention_forward(const AttentionParams<uint16_t, float>& p) { cuda::attention_forward(p, launch()); }
void CudaOps::attention_backward(const AttentionParams<uint16_t, float>& p) { cuda::attention_backward(p, launch()); }

}  // namespace ms::cuda
