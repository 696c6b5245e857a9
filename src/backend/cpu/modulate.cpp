#include "ops/modulate.h"

#include <algorithm>
#include <vector>

#include "core/parallel.h"

namespace ms::cpu {

namespace {

constexpr int64_t kModulateChannelBlock = 64;  // channels per task in the reductions over tokens

// Calls fn(b, c0, c1) for every sample b and channel block [c0, c1), in parallel: each task owns
// its (b, channel block), so per-channel sums over the L tokens need no synchronisation.
template <class F>
void for_batch_channel_blocks(int64_t B, int64_t C, F&& fn) {
  const int64_t nblk = (C + kModulateChannelBlock - 1) / kModulateChannelBlock;
  parallel_for(B * nblk, [&](int64_t i) {
    const int64_t c0 = (i % nblk) * kModulateChannelBlock;
    fn(i / nblk, c0, std::min(C, c0 + kModulateChannelBlock));
  });
}

}  // namespace

template <class T>
void modulate_forward(const ModulateParams<T>& p) {
  const T *x = p.x, *shift = p.shift, *scale = p.scale;
  T* y = p.y;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  parallel_for(
      B * L,
      [&](int64_t r) {
        const int64_t b = r / L;
        const T* sh = shift + b * stride;  // [C]
        const T* sc = scale + b * stride;  // [C]
        for (int64_t c = 0; c < C; ++c) y[r * C + c] = x[r * C + c] * (T(1) + sc[c]) + sh[c];
      },
      16);
}

template <class T>
void modulate_backward(const ModulateParams<T>& p) {
  const T *x = p.x, *scale = p.scale, *dy = p.dy;
  T *dx = p.dx, *dshift = p.dshift, *dscale = p.dscale;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  for_batch_channel_blocks(B, C, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> ssh(c1 - c0, 0.0), ssc(c1 - c0, 0.0);  // [c1 - c0]
    const T* sc = scale + b * stride;                          // [C]
    for (int64_t l = 0; l < L; ++l) {
      const int64_t r = (b * L + l) * C;
      for (int64_t c = c0; c < c1; ++c) {
        const T g = dy[r + c];
        if (dx) dx[r + c] += g * (T(1) + sc[c]);
        ssh[c - c0] += double(g);
        ssc[c - c0] += double(g) * double(x[r + c]);
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      dshift[b * stride + c] += T(ssh[c - c0]);
      dscale[b * stride + c] += T(ssc[c - c0]);
    }
  });
}

template <class T>
void gate_residual_forward(const GateResidualParams<T>& p) {
  const T *x = p.x, *y = p.y, *gate = p.gate;
  T* out = p.out;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  parallel_for(
      B * L,
      [&](int64_t r) {
        const T* g = gate ? gate + (r / L) * stride : nullptr;  // [C] or null
        for (int64_t c = 0; c < C; ++c) out[r * C + c] = x[r * C + c] + (g ? y[r * C + c] * g[c] : y[r * C + c]);
      },
      16);
}

template <class T>
void gate_residual_backward(const GateResidualParams<T>& p) {
  const T *y = p.y, *gate = p.gate, *dout = p.dout;
  T *dx = p.dx, *dy = p.dy, *dgate = p.dgate;
  const int64_t B = p.B, L = p.L, C = p.C, stride = p.stride;
  for_batch_channel_blocks(B, C, [&](int64_t b, int64_t c0, int64_t c1) {
    std::vector<double> sg(c1 - c0, 0.0);             // [c1 - c0]
    const T* g = gate ? gate + b * stride : nullptr;  // [C] or null
    for (int64_t l = 0; l < L; ++l) {
      const int64_t r = (b * L + l) * C;
      for (int64_t c = c0; c < c1; ++c) {
        const T d = dout[r + c];
        if (dx) dx[r + c] += d;
        dy[r + c] += g ? d * g[c] : d;
        sg[c - c0] += double(d) * double(y[r + c]);
      }
    }
    if (g)
      for (int64_t c = c0; c < c1; ++c) dgate[b * stride + c] += T(sg[c - c0]);
  });
}

template <class T>
void modulation_forward(const ModulationParams<T>& p) {
  const T *param = p.param, *e = p.e;
  T* mod = p.mod;
  const int64_t B = p.B, K = p.K, C = p.C;
  const bool per_chunk = p.per_chunk;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t c = 0; c < C; ++c)
        mod[(b * K + i) * C + c] = param[i * C + c] + e[per_chunk ? (b * K + i) * C + c : b * C + c];
}

template <class T>
void modulation_backward(const ModulationParams<T>& p) {
  const T* dmod = p.dmod;
  T *dparam = p.dparam, *de = p.de;
  const int64_t B = p.B, K = p.K, C = p.C;
  const bool per_chunk = p.per_chunk;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < K; ++i)
      for (int64_t c = 0; c < C; ++c) {
        const T g = dmod[(b * K + i) * C + c];
        dparam[i * C + c] += g;
        de[per_chunk ? (b * K + i) * C + c : b * C + c] += g;
      }
}

template void modulation_forward<float>(const ModulationParams<float>&);
template void modulation_forward<double>(const ModulationParams<double>&);
template void modulation_backward<float>(const ModulationParams<float>&);
template void modulation_backward<double>(const ModulationParams<double>&);
template void modulate_forward<float>(const ModulateParams<float>&);
template void modulate_forward<double>(const ModulateParams<double>&);
template void modulate_backward<float>(const ModulateParams<float>&);
template void modulate_backward<double>(const ModulateParams<double>&);
template void gate_residual_forward<float>(const GateResidualParams<float>&);
template void gate_residual_forward<double>(const GateResidualParams<double>&);
template void gate_residual_backward<float>(const GateResidualParams<float>&);
template void gate_residual_backward<double>(const GateResidualParams<double>&);

}  // namespace ms::cpu
