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
#include "ops/activation.h"
#include "ops/dwconv3d.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
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
  bool dsa_tensor_cores = true;          // dsa's forward on tensor cores where it applies (speed only)

  void zero(uint16_t* p, int64_t n);
  void zero(float* p, int64_t n);
  void copy(uint16_t* dst, const uint16_t* src, int64_t n);

  void modulation_forward(const ModulationParams<uint16_t, float>& p);
  void modulation_backward(const ModulationParams<uint16_t, float>& p);
  // LayerNorm and modulation in one pass: p.ln and p.tmp are unused.
  void norm_modulate_forward(const NormModulateParams<uint16_t, float>& p);
  void norm_modulate_backward(const NormModulateParams<uint16_t, float>& p);
  void layernorm_forward(const LayerNormParams<uint16_t, float>& p);
  void layernorm_backward(const LayerNormParams<uint16_t, float>& p);
  void rmsnorm_forward(const RmsNormParams<uint16_t, float>& p);
  void rmsnorm_backward(const RmsNormParams<uint16_t, float>& p);
  void linear_forward(const LinearParams<uint16_t, uint16_t, float>& p);
  void linear_backward(const LinearParams<uint16_t, uint16_t, float>& p);
  void rope_forward(const RopeParams<uint16_t>& p);
  void rope_backward(const RopeParams<uint16_t>& p);
  // The time path in fp32 (linear_f32, SiLU on fp32), the embeddings and the re-layouts.
  void time_linear_forward(const LinearParams<float, uint16_t, float>& p);
  void time_linear_backward(const LinearParams<float, uint16_t, float>& p);
  void time_silu_forward(const ActivationParams<float>& p);
  void time_silu_backward(const ActivationParams<float>& p);
  void sinusoidal_embedding(const SinusoidalParams<float>& p);
  void pad_context_forward(const PadContextParams<float, uint16_t>& p);
  void pad_context_backward(const PadContextParams<float, uint16_t>& p);
  void patchify_forward(const PatchifyParams<float, uint16_t>& p);
  void patchify_backward(const PatchifyParams<float, uint16_t>& p);
  void unpatchify_forward(const UnpatchifyParams<uint16_t, float>& p);
  void unpatchify_backward(const UnpatchifyParams<uint16_t, float>& p);
  void gelu_tanh_forward(const ActivationParams<uint16_t>& p);
  void gelu_tanh_backward(const ActivationParams<uint16_t>& p);
  void gate_residual_forward(const GateResidualParams<uint16_t, float>& p);
  void gate_residual_backward(const GateResidualParams<uint16_t, float>& p);
  void window_attention_forward(const WindowAttentionParams<uint16_t, float>& p);
  void window_attention_backward(const WindowAttentionParams<uint16_t, float>& p);
  void dsa_forward(const DsaParams<uint16_t, float>& p);
  void dsa_backward(const DsaParams<uint16_t, float>& p);
  void dwconv3d_forward(const Dwconv3dParams<uint16_t, float>& p);
  void dwconv3d_backward(const Dwconv3dParams<uint16_t, float>& p);
  void dsa_offsets_forward(const DsaOffsetsParams<uint16_t>& p);
  void dsa_offsets_backward(const DsaOffsetsParams<uint16_t>& p);
  void attention_forward(const AttentionParams<uint16_t, float>& p);
  void attention_backward(const AttentionParams<uint16_t, float>& p);

 private:
  Launch launch() const { return {stream, scratch, scratch_numel, dsa_halo_rows, dsa_tensor_cores}; }
};

}  // namespace ms::cuda
