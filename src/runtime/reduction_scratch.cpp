#include "runtime/reduction_scratch.h"

#include <algorithm>

namespace ms::cuda {

int64_t linear_backward_scratch(int64_t N, int64_t out) { return column_scratch(N, out); }
int64_t layernorm_backward_scratch(int64_t N, int64_t C) { return column_scratch(N, C); }
int64_t rmsnorm_backward_scratch(int64_t N, int64_t C) { return column_scratch(N, C); }
int64_t modulate_backward_scratch(int64_t L, int64_t C) { return column_scratch(L, C); }
int64_t layernorm_modulate_backward_scratch(int64_t L, int64_t C) { return column_scratch(L, C); }
int64_t attention_backward_scratch(const AttentionDims& a) { return a.B * a.nh * a.Lq; }
// The offset reach (3 floats and one of padding, which keeps the float2 coefficients aligned), then the coefficients.
int64_t dsa_backward_scratch(const VideoAttentionDims& d, const DsaArgs& a) {
  return 4 + 2 * d.B * d.nh * d.L() * a.P();
}
int64_t dwconv3d_backward_scratch(int64_t N, int64_t C) { return (N + kDwconvRows - 1) / kDwconvRows * 28 * C; }

int64_t block_reduction_scratch(const ModelConfig& c, const ModelDims& d) {
  const int64_t N = d.N(), D = c.dim, Nc = d.B * d.Lt, nh = c.num_heads, hd = c.head_dim();
  const auto& at = c.attention;
  int64_t local = 0;  // dsa and dsa_fixed's backward, dsa's offset network
  if (at.is_dsa()) local = dsa_backward_scratch({d.B, d.f, d.h, d.w, nh, hd}, {at.window, c.groups()});
  if (at.has_offsets())
    local = std::max({local, dwconv3d_backward_scratch(N, D), linear_backward_scratch(N, c.groups() * at.slots() * 3)});
  return std::max({local, linear_backward_scratch(N, D), linear_backward_scratch(N, c.ffn_dim),
                   linear_backward_scratch(Nc, D), layernorm_backward_scratch(N, D), rmsnorm_backward_scratch(N, D),
                   rmsnorm_backward_scratch(Nc, D), modulate_backward_scratch(d.L, D),
                   layernorm_modulate_backward_scratch(d.L, D), attention_backward_scratch({d.B, d.L, d.L, nh, hd}),
                   attention_backward_scratch({d.B, d.L, d.Lt, nh, hd})});
}

}  // namespace ms::cuda
