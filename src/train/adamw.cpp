// The AdamW constants, the scalar reference update and the gradient sum of squares. The SIMD update is
// in adamw_simd.cpp.
#include "train/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"

namespace ms {

AdamWScalars adamw_scalars(const AdamWConfig& c, double lr, int64_t t, float grad_scale) {
  const double bc1 = 1.0 - std::pow(c.beta1, double(t)), bc2 = 1.0 - std::pow(c.beta2, double(t));
  return {grad_scale,
          float(1.0 - lr * c.weight_decay),
          float(c.beta1),
          float(1.0 - c.beta1),
          float(c.beta2),
          float(1.0 - c.beta2),
          float(std::sqrt(bc2)),
          float(lr / bc1),
          float(c.eps)};
}

void adamw_update_reference(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad,
                            float* master, float* m, float* v, uint16_t* weights, int64_t n) {
  const AdamWScalars s = adamw_scalars(c, lr, t, grad_scale);
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * s.grad_scale;
    const float p = master[i] * s.decay;
    m[i] = s.b1 * m[i] + s.c1 * g;
    v[i] = s.b2 * v[i] + s.c2 * g * g;
    const float d = std::sqrt(v[i]) / s.sqrt_bc2 + s.eps;
    master[i] = p - s.step_size * m[i] / d;
    weights[i] = f32_to_bf16(master[i]);
  }
}

double sum_squares(const float* x, int64_t n) {
  // Chunks of kChunk values, each summed in kLanes interleaved double accumulators (independent add
  // chains the compiler vectorises) combined pairwise; chunk sums added in order.
  constexpr int64_t kChunk = 1 << 15, kLanes = 8;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(chunks), 0.0);
  parallel_for(chunks, [&](int64_t chunk) {
    const int64_t begin = chunk * kChunk, count = std::min(n, begin + kChunk) - begin;
    const float* c = x + begin;
    double acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= count; i += kLanes)
      for (int64_t k = 0; k < kLanes; ++k) acc[k] += double(c[i + k]) * double(c[i + k]);
    for (int64_t k = 0; i + k < count; ++k) acc[k] += double(c[i + k]) * double(c[i + k]);
    for (int64_t width = kLanes / 2; width > 0; width /= 2)
      for (int64_t k = 0; k < width; ++k) acc[k] += acc[k + width];
    part[size_t(chunk)] = acc[0];
  });
  double total = 0;
  for (double s : part) total += s;
  return total;
}

}  // namespace ms
