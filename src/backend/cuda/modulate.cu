#include "backend/cuda/kernel_util.cuh"
#include "backend/cuda/modulate.h"

namespace ms::cuda {
namespace {

// Calls f(i, b, c) for every element i = (b * L + l) * C + c of a [B, L, C] tensor.
template <class F>
__global__ void for_each_token_channel(int64_t B, int64_t L, int64_t C, F f) {
  const int64_t n = B * L * C;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    f(i, i / (L * C), i % C);
}

template <class F>
void launch(int64_t B, int64_t L, int64_t C, Stream stream, F f) {
  for_each_token_channel<<<elementwise_blocks(B * L * C), 256, 0, stream>>>(B, L, C, f);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace

void modulate_forward(const ModulateParams<uint16_t, float>& p, Stream stream) {
  const uint16_t* x = p.x;
  const float *shift = p.shift, *scale = p.scale;
  uint16_t* y = p.y;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  launch(B, L, C, stream, [=] __device__(int64_t i, int64_t b, int64_t c) {
    store(y, i, load(x, i) * (1.f + scale[b * stride + c]) + shift[b * stride + c]);
  });
}

void modulate_backward(const ModulateParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *x = p.x, *dy = p.dy;
  const float* scale = p.scale;
  uint16_t* dx = p.dx;
  float *dshift = p.dshift, *dscale = p.dscale;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(modulate_backward_scratch(L, C));
  if (dx)
    launch(B, L, C, stream, [=] __device__(int64_t i, int64_t b, int64_t c) {
      store(dx, i, load(dx, i) + load(dy, i) * (1.f + scale[b * stride + c]));
    });
  for (int64_t b = 0; b < B; ++b) {  // per sample: dshift [C] += sum_l dy, dscale [C] += sum_l dy x
    const uint16_t *xb = x + b * L * C, *dyb = dy + b * L * C;  // [L, C]
    column_sum([=] __device__(int64_t l, int64_t c) { return load(dyb, l * C + c); }, dshift + b * stride, scratch, L,
               C, stream);
    column_sum([=] __device__(int64_t l, int64_t c) { return load(dyb, l * C + c) * load(xb, l * C + c); },
               dscale + b * stride, scratch, L, C, stream);
  }
}

void gate_residual_forward(const GateResidualParams<uint16_t, float>& p, Stream stream) {
  const uint16_t *x = p.x, *y = p.y;
  const float* gate = p.gate;
  uint16_t* out = p.out;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  launch(B, L, C, stream, [=] __device__(int64_t i, int64_t b, int64_t c) {
    store(out, i, load(x, i) + load(y, i) * (gate ? gate[b * stride + c] : 1.f));
  });
}

void gate_residual_backward(const GateResidualParams<uint16_t, float>& p, const Launch& l) {
  const uint16_t *y = p.y, *dout = p.dout;
  const float* gate = p.gate;
  uint16_t *dx = p.dx, *dy = p.dy;
  float* dgate = p.dgate;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  const Stream stream = l.stream;
  float* scratch = l.scratch_for(modulate_backward_scratch(L, C));
  launch(B, L, C, stream, [=] __device__(int64_t i, int64_t b, int64_t c) {
    const float g = load(dout, i);
    if (dx) store(dx, i, load(dx, i) + g);
    store(dy, i, load(dy, i) + g * (gate ? gate[b * stride + c] : 1.f));
  });
  if (!gate) return;
  for (int64_t b = 0; b < B; ++b) {                              // dgate [C] += sum_l dout y, per sample
    const uint16_t *yb = y + b * L * C, *db = dout + b * L * C;  // [L, C]
    column_sum([=] __device__(int64_t l, int64_t c) { return load(db, l * C + c) * load(yb, l * C + c); },
               dgate + b * stride, scratch, L, C, stream);
  }
}

namespace {

// One thread per channel c, looping over b and i in order: the sums into dparam and a shared de are those of the CPU.
__global__ void modulation_backward_kernel(const float* dmod, float* dparam, float* de, int64_t B, int64_t K, int64_t C,
                                           bool per_chunk) {
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < K; ++i) {
      const float g = dmod[(b * K + i) * C + c];
      dparam[i * C + c] += g;
      de[per_chunk ? (b * K + i) * C + c : b * C + c] += g;
    }
}

}  // namespace

void modulation_forward(const ModulationParams<uint16_t, float>& p, Stream stream) {
  const uint16_t* param = p.param;
  const float* e = p.e;
  float* mod = p.mod;
  const int64_t B = p.B, K = p.K, C = p.C;
  const bool per_chunk = p.per_chunk;
  launch(B, K, C, stream, [=] __device__(int64_t i, int64_t b, int64_t c) {
    const int64_t chunk = i / C % K;
    mod[i] = load(param, chunk * C + c) + e[per_chunk ? i : b * C + c];
  });
}

void modulation_backward(const ModulationParams<uint16_t, float>& p, Stream stream) {
  const float* dmod = p.dmod;
  float *dparam = p.dparam, *de = p.de;
  const int64_t B = p.B, K = p.K, C = p.C;
  const bool per_chunk = p.per_chunk;
  if (C == 0) return;
  modulation_backward_kernel<<<unsigned((C + 255) / 256), 256, 0, stream>>>(dmod, dparam, de, B, K, C, per_chunk);
  MS_CUDA_CHECK_LAUNCH();
}

}  // namespace ms::cuda
