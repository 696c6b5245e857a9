#include "train/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "core/parallel.h"

namespace ms {
namespace {
constexpr int64_t kChunk = 1 << 15;
}

void adamw_update(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad, float* master,
                  float* m, float* v, uint16_t* weights, int64_t n) {
  const float b1 = float(c.beta1), b2 = float(c.beta2), eps = float(c.eps);
  const float bc1 = float(1.0 - std::pow(c.beta1, double(t))), bc2 = float(1.0 - std::pow(c.beta2, double(t)));
  const float step = float(lr) / bc1, decay = float(lr * c.weight_decay), rsqrt_bc2 = 1.0f / std::sqrt(bc2);
  parallel_for((n + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t end = std::min(n, (chunk + 1) * kChunk);
    for (int64_t i = chunk * kChunk; i < end; ++i) {
      const float g = grad[i] * grad_scale;
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const float p = master[i] - decay * master[i];
      master[i] = p - step * m[i] / (std::sqrt(v[i]) * rsqrt_bc2 + eps);
      weights[i] = f32_to_bf16(master[i]);
    }
  });
}

double sum_squares(const float* x, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(chunks), 0.0);
  parallel_for(chunks, [&](int64_t chunk) {
    double s = 0;
    for (int64_t i = chunk * kChunk; i < std::min(n, (chunk + 1) * kChunk); ++i) s += double(x[i]) * double(x[i]);
    part[size_t(chunk)] = s;
  });
  double total = 0;
  for (double s : part) total += s;
  return total;
}

}  // namespace ms
