// AdaLN modulation and gated residuals, per batch sample b over its L tokens. A = the activations' element type,
// S = the modulation's and its gradients' (T on the CPU; bf16 and fp32 on the GPU). The modulation's rows are
// `stride` apart (6*C for the block's e0 chunks, 2*C for the head's): shift, scale and gate point at row b = 0.
#pragma once
#include <cstdint>

namespace ms {

// y[b,l,c] = x[b,l,c] * (1 + scale[b*stride + c]) + shift[b*stride + c]. The backward accumulates
// dx += dy*(1+scale) (skipped when dx is null), dshift[b*stride+c] += sum_l dy, dscale[b*stride+c] += sum_l dy*x.
template <class A, class S = A>
struct ModulateParams {
  const A* x = nullptr;      // [B, L, C]
  const S* shift = nullptr;  // rows of C, stride apart
  const S* scale = nullptr;
  A* y = nullptr;         // [B, L, C]
  const A* dy = nullptr;  // [B, L, C]
  A* dx = nullptr;        // [B, L, C] +=
  S* dshift = nullptr;    // +=
  S* dscale = nullptr;    // +=
  int64_t B = 0, L = 0, C = 0, stride = 0;
};

// out[b,l,c] = x[b,l,c] + y[b,l,c] * gate[b*stride + c] (gate null: gate = 1). The backward, given dout,
// accumulates dx += dout (skipped when dx is null), dy += dout*gate, dgate[b*stride+c] += sum_l dout*y (skipped when
// gate is null).
template <class A, class S = A>
struct GateResidualParams {
  const A* x = nullptr;     // [B, L, C]
  const A* y = nullptr;     // [B, L, C]
  const S* gate = nullptr;  // rows of C, stride apart, or null
  A* out = nullptr;         // [B, L, C] (may be y)
  const A* dout = nullptr;  // [B, L, C]
  A* dx = nullptr;          // +=
  A* dy = nullptr;          // +=
  S* dgate = nullptr;       // +=
  int64_t B = 0, L = 0, C = 0, stride = 0;
};

// The stages' AdaLN modulation from the time embedding: mod[b, i, c] = param[i*C + c] + e[b, i, c]; e is [B, K, C]
// when per_chunk (the block's e0), else [B, C] shared by the K chunks (the head's e). The backward, given dmod,
// accumulates dparam += sum over b, de += dmod (summed over i when shared), in the order b, i. W = the parameter's
// element type.
template <class W, class S = W>
struct ModulationParams {
  const W* param = nullptr;  // [K, C]
  const S* e = nullptr;      // [B, K, C] or [B, C]
  S* mod = nullptr;          // [B, K, C]
  const S* dmod = nullptr;   // [B, K, C]
  S* dparam = nullptr;       // [K, C] +=
  S* de = nullptr;           // shape of e, +=
  int64_t B = 0, K = 0, C = 0;
  bool per_chunk = false;
};

// LayerNorm without affine (ops/layernorm.h) into ln, then the modulation into y: the block's norm1 / norm2 and the
// head's norm. The backward accumulates dx, dshift, dscale; tmp [B*L, C] is scratch. A backend may fuse the two
// (the GPU's never writes ln or uses tmp).
template <class A, class S = A>
struct NormModulateParams {
  const A* x = nullptr;      // [B, L, C]
  const S* shift = nullptr;  // rows of C, stride apart
  const S* scale = nullptr;
  A* ln = nullptr;        // [B, L, C] the normalised x
  A* y = nullptr;         // [B, L, C]
  S* mean = nullptr;      // [B*L]
  S* rstd = nullptr;      // [B*L]
  const A* dy = nullptr;  // [B, L, C]
  A* tmp = nullptr;       // [B*L, C]
  A* dx = nullptr;        // +=
  S* dshift = nullptr;    // +=
  S* dscale = nullptr;    // +=
  int64_t B = 0, L = 0, C = 0, stride = 0;
  double eps = 0;
};

}  // namespace ms

namespace ms::cpu {

template <class T>
void modulate_forward(const ModulateParams<T>& p);
template <class T>
void modulate_backward(const ModulateParams<T>& p);
template <class T>
void gate_residual_forward(const GateResidualParams<T>& p);
template <class T>
void gate_residual_backward(const GateResidualParams<T>& p);
template <class T>
void modulation_forward(const ModulationParams<T>& p);
template <class T>
void modulation_backward(const ModulationParams<T>& p);

}  // namespace ms::cpu
