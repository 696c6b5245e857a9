// AdamW with decoupled weight decay on the fp32 master copy (torch.optim.AdamW semantics), fused in one
// pass that also writes the bf16 working weights. adamw_update is a Highway kernel with runtime dispatch
// (AVX-512, AVX2, SSE4, SSSE3, NEON, SVE, scalar) run over chunks on every thread; adamw_update_reference
// is the plain scalar loop it must equal bit for bit.
//
// Order of float operations per element (both implementations; every op rounds to float separately,
// which is why src/train/adamw*.cpp are built with -ffp-contract=off):
//   g  = grad * grad_scale
//   p  = master * decay                     decay = 1 - lr * weight_decay     (torch: param.mul_)
//   m' = (b1 * m) + (c1 * g)                c1 = 1 - b1
//   v' = (b2 * v) + ((c2 * g) * g)          c2 = 1 - b2                       (torch: addcmul_)
//   d  = (sqrt(v') / sqrt_bc2) + eps        sqrt_bc2 = sqrt(1 - b2^t)
//   p' = p - ((step_size * m') / d)         step_size = lr / (1 - b1^t)       (torch: addcdiv_)
//   weights = bf16(p')                      round to nearest even, NaN kept quiet (f32_to_bf16)
// The per-step constants are computed in double and rounded to float once (AdamWScalars), as torch
// does with its Python-float scalars. This is torch's single-tensor AdamW op for op except for m', which
// torch computes as a lerp (m + c1 * (g - m)); that differs by rounding only.
#pragma once
#include <cstdint>

namespace ms {

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
};

// The float constants of one update (see the op order above).
struct AdamWScalars {
  float grad_scale, decay, b1, c1, b2, c2, sqrt_bc2, step_size, eps;
};

// Constants for the 1-based step t at learning rate lr; grad_scale multiplies every gradient
// (global-norm clipping).
AdamWScalars adamw_scalars(const AdamWConfig& c, double lr, int64_t t, float grad_scale);

// One update of n elements in place: grad [n] read; master, m (exp_avg), v (exp_avg_sq) [n] fp32
// read and written; weights [n] bf16 bits written. SIMD, multithreaded; bit-identical to the reference
// on every target and for any thread count.
void adamw_update(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad, float* master,
                  float* m, float* v, uint16_t* weights, int64_t n);

// The same update as a plain single-threaded scalar loop (the CPU reference for tests).
void adamw_update_reference(const AdamWConfig& c, double lr, int64_t t, float grad_scale, const float* grad,
                            float* master, float* m, float* v, uint16_t* weights, int64_t n);

// Name of the SIMD target adamw_update dispatches to on this CPU, e.g. "AVX3".
const char* adamw_simd_target();

// Sum of squares of n values in double, in a fixed order (deterministic for any thread count and CPU).
double sum_squares(const float* x, int64_t n);

}  // namespace ms
