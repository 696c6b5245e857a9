#include "ops/reduction_scratch.h"

#include <algorithm>

#include "ops/attention.h"
#include "ops/layernorm.h"
#include "ops/layernorm_modulate.h"
#include "ops/linear.h"
#include "ops/modulate.h"
#include "ops/rmsnorm.h"

namespace ms::cuda {

int64_t linear_backward_scratch(int64_t N, int64_t out) { return column_scratch(N, out); }
int64_t layernorm_backward_scratch(int64_t N, int64_t C) { return column_scratch(N, C); }
int64_t rmsnorm_backward_scratch(int64_t N, int64_t C) { return column_scratch(N, C); }
int64_t modulate_backward_scratch(int64_t L, int64_t C) { return column_scratch(L, C); }
int64_t layernorm_modulate_backward_scratch(int64_t L, int64_t C) { return column_scratch(L, C); }
int64_t attention_backward_scratch(const AttentionDims& a) { return a.B * a.nh * a.Lq; }

int64_t block_reduction_scratch(const ModelConfig& c, const ModelDims& d) {
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt, nh = c.num_heads, hd = c.head_dim();
  return std::max({linear_backward_scratch(N, D), linear_backward_scratch(N, c.ffn_dim), linear_backward_scratch(Nc, D),
                   layernorm_backward_scratch(N, D), rmsnorm_backward_scratch(N, D), rmsnorm_backward_scratch(Nc, D),
                   modulate_backward_scratch(d.L, D), layernorm_modulate_backward_scratch(d.L, D),
                   attention_backward_scratch({d.B, d.L, d.L, nh, hd}),
                   attention_backward_scratch({d.B, d.L, d.Lt, nh, hd})});
}

}  // namespace ms::cuda
