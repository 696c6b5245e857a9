// AdamW with decoupled weight decay on the fp32 master copy (a plain multithreaded loop; the SIMD
// optimizer of the streaming runtime replaces it).
#pragma once
#include <cstdint>

namespace ms {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// One step at 1-based step t with learning rate lr on n elements: g = grad * grad_scale (global-norm
// clipping); m, v updated; master -= lr * (m_hat / (sqrt(v_hat) + eps) + weight_decay * master);
// weights = bf16(master).
void adamw_update(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad, float* master,
                  float* m, float* v, uint16_t* weights, int64_t n);

// Sum of squares of n values in double, in a fixed order (deterministic for any thread count).
double sum_squares(const float* x, int64_t n);

}  // namespace ms
