#include "ops/embedding.h"

#include <algorithm>
#include <cmath>

#include "core/parallel.h"

namespace ms::cpu {

template <class T>
void sinusoidal_embedding(const SinusoidalParams<T>& p) {
  const T* t = p.t;
  T* out = p.out;
  const int64_t B = p.B, dim = p.dim;
  const int64_t half = dim / 2;
  parallel_for(
      B,
      [&](int64_t b) {
        for (int64_t i = 0; i < half; ++i) {
          const double a = double(t[b]) * std::pow(10000.0, -double(i) / double(half));
          out[b * dim + i] = T(std::cos(a));
          out[b * dim + half + i] = T(std::sin(a));
        }
      },
      16);
}

template <class T>
void pad_context_forward(const PadContextParams<T>& p) {
  const T* context = p.context;
  T* padded = p.padded;
  const int64_t B = p.B, Lc = p.Lc, Lt = p.Lt, C = p.C;
  parallel_for(
      B * Lt,
      [&](int64_t r) {
        const int64_t b = r / Lt, l = r % Lt;
        T* dst = padded + r * C;  // [C]
        if (l < Lc)
          std::copy(context + (b * Lc + l) * C, context + (b * Lc + l + 1) * C, dst);
        else
          std::fill(dst, dst + C, T(0));
      },
      64);
}

template <class T>
void pad_context_backward(const PadContextParams<T>& p) {
  const T* dpadded = p.dpadded;
  T* dcontext = p.dcontext;
  const int64_t B = p.B, Lc = p.Lc, Lt = p.Lt, C = p.C;
  parallel_for(
      B * Lc,
      [&](int64_t r) {
        const int64_t b = r / Lc, l = r % Lc;
        std::copy(dpadded + (b * Lt + l) * C, dpadded + (b * Lt + l + 1) * C, dcontext + r * C);
      },
      64);
}

template void sinusoidal_embedding<float>(const SinusoidalParams<float>&);
template void sinusoidal_embedding<double>(const SinusoidalParams<double>&);
template void pad_context_forward<float>(const PadContextParams<float>&);
template void pad_context_forward<double>(const PadContextParams<double>&);
template void pad_context_backward<float>(const PadContextParams<float>&);
template void pad_context_backward<double>(const PadContextParams<double>&);

}  // namespace ms::cpu
